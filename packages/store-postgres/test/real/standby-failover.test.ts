import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { type AuditEventDraft, newId } from '@svc/core';
import { type SessionRecord, storeFaultOf } from '@svc/core/store';
import pg from 'pg';
import { openPostgresStore, type PostgresStore } from '../../src/index.js';
import { type ReplicatedPostgres, startReplicatedPostgres } from '../replicated-postgres.js';
import { managementSession } from '../session-record.js';

const NOW = Date.UTC(2026, 10, 27, 12, 0, 0);
let n = 0;

function draft(): AuditEventDraft {
  n++;
  return {
    id: `evt_${String(n).padStart(26, '0')}`,
    at: NOW,
    type: 'signin.failed',
    realm: 'management',
    subject: null,
    deviceId: null,
    sessionId: null,
    data: { reason: 'failover-test' },
  };
}

/** Waits until `op` succeeds, for at most 60 s, failing with `what`; every failure meanwhile must be a classified store fault. */
async function eventually<T>(what: string, op: () => Promise<T>): Promise<T> {
  const until = Date.now() + 60_000;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      assert.notEqual(storeFaultOf(err), null, `an unclassified failure while waiting for ${what}: ${String(err)}`);
      if (Date.now() > until) assert.fail(`waited 60 s for ${what}; last: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

async function count(url: string, schema: string, id: string): Promise<number> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(`SELECT count(*)::int AS n FROM ${schema}.audit_events WHERE id = $1`, [id])).rows[0].n as number;
  } finally {
    await c.end();
  }
}

/** Waits, for at most 10 s, until the event `id` is visible in `schema` on the server at `url` (a standby replays what it has flushed a moment later). */
async function visibleOn(url: string, schema: string, id: string): Promise<void> {
  const until = Date.now() + 10_000;
  let last = '';
  for (;;) {
    try {
      if ((await count(url, schema, id)) === 1) return;
      last = 'not there yet';
    } catch (err) {
      // 42P01: the schema's tables are not replayed yet.
      if ((err as { code?: string }).code !== '42P01') throw err;
      last = String(err);
    }
    if (Date.now() > until) assert.fail(`waited 10 s for event ${id} to be replayed on the standby; last: ${last}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The digests of a token pair, each 64 times `access` or `refresh`, expiring as a sign-in's. */
function pairOf(access: string, refresh: string) {
  return {
    accessDigest: access.repeat(64),
    refreshDigest: refresh.repeat(64),
    accessExpiresAt: NOW + 900_000,
    refreshExpiresAt: NOW + 86_400_000,
  };
}

/** Enrolls a management device for `subject` on `store` (its key 32 times `key`); answers a fresh session record of it under `id`. */
async function enrolledDevice(store: PostgresStore, subject: string, key: string): Promise<(id: string) => SessionRecord> {
  const device = {
    id: newId('device', { now: () => NOW }, (n) => randomBytes(n)),
    publicKey: key.repeat(32),
    realm: 'management' as const,
    subject,
    name: subject,
    createdAt: NOW,
    removedAt: null,
  };
  await store.enrollDevice(device, { ...draft(), type: 'device.enrolled', deviceId: device.id, subject });
  return (id) => managementSession(id, device, NOW, 86_400_000);
}

describe('a primary and a synchronous standby given to the store as one libpq host list (started by this file)', () => {
  let rp: ReplicatedPostgres;
  before(async () => {
    rp = await startReplicatedPostgres();
  });
  after(async () => {
    await rp?.dispose();
  });

  test('a standby listed first is passed over (target_session_attrs=read-write): the store opens, migrates and writes on the primary', async () => {
    const standbyFirst = `postgres://postgres@127.0.0.1:${rp.standbyPort},127.0.0.1:${rp.primaryPort}/postgres?target_session_attrs=read-write`;
    const store = await openPostgresStore({ connectionString: standbyFirst, schema: 'standby_first', max: 2, allowUnauthenticated: true });
    try {
      const event = await store.appendAuditEvent(draft());
      // synchronous_commit=on acknowledges once the standby has flushed the commit's WAL, not
      // once it has replayed it: a read on the standby right after may not see it yet (a CI run
      // read before the schema's creation was replayed). The write has reached the standby when
      // the standby shows it; replay is bounded by the wait.
      await visibleOn(rp.standbyUrl, 'standby_first', event.id);
    } finally {
      await store.close();
    }
  });

  test('a host list with a target_session_attrs the store cannot use is refused before connecting', async () => {
    await assert.rejects(
      openPostgresStore({
        connectionString: `${rp.url.replace('read-write', 'read-only')}`,
        schema: 'refused',
        allowUnauthenticated: true,
      }),
      (err: unknown) => err instanceof TypeError && /target_session_attrs must be one of any, read-write, primary/.test(err.message),
    );
  });

  /**
   * Stops the standby, starts `write`, and cancels every svc-auth query then waiting for the
   * standby (wait_event SyncRep), as an operator's or a tool's `pg_cancel_backend` would: PostgreSQL
   * then commits locally, answers success and only warns. Acknowledging that would promise a write
   * a failover loses, so `write` must fail as a `timeout` store fault. The standby is started again.
   */
  async function cancelledWhileWaitingForTheStandby(write: () => Promise<unknown>): Promise<void> {
    const primary = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${rp.primaryPort}/postgres` });
    await primary.connect();
    try {
      await rp.stopStandby();
      try {
        const pending = write();
        let settled = false;
        pending.then(
          () => {
            settled = true;
          },
          () => {
            settled = true;
          },
        );
        // Every waiting commit is cancelled until the write settles: the audit sealer's may wait
        // too, and a write left waiting would only end at the store's 6 s bound on an answer (a
        // timeout, whatever the write's own check). So it must settle well before that bound.
        const started = Date.now();
        let cancelled = 0;
        while (!settled) {
          if (Date.now() - started > 30_000) assert.fail('waited 30 s for the write to settle while cancelling its wait for the standby');
          const r = await primary.query(
            "SELECT count(*) FILTER (WHERE pg_cancel_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name LIKE 'svc-auth%' AND wait_event = 'SyncRep'",
          );
          cancelled += r.rows[0].n as number;
          if (!settled) await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(cancelled > 0, 'no svc-auth commit ever waited for the synchronous standby (wait_event SyncRep)');
        assert.ok(
          Date.now() - started < 4_000,
          `the write settled after ${Date.now() - started} ms, at the store's bound on an answer, not at its cancelled wait`,
        );
        // Refused for the standby's cancelled wait itself, not for a timeout of another kind.
        await assert.rejects(
          pending,
          (err: unknown) =>
            storeFaultOf(err) === 'timeout' && (err as { cause?: { name?: string } }).cause?.name === 'UnreplicatedCommitError',
        );
      } finally {
        await rp.startStandby();
      }
    } finally {
      await primary.end();
    }
  }

  test('sync-rep-wait-cancelled: a commit the standby never confirmed (its wait cancelled with pg_cancel_backend) is not acknowledged', async () => {
    const store = await openPostgresStore({ connectionString: rp.url, schema: 'unconfirmed', max: 2, allowUnauthenticated: true });
    try {
      await store.appendAuditEvent(draft());
      await cancelledWhileWaitingForTheStandby(() =>
        store.enrollDevice(
          {
            id: 'dev_01JDZ0000000000000000000AA',
            publicKey: 'cd'.repeat(32),
            realm: 'management',
            subject: 'usr_failover',
            name: 'unconfirmed',
            createdAt: NOW,
            removedAt: null,
          },
          { ...draft(), type: 'device.enrolled', deviceId: 'dev_01JDZ0000000000000000000AA', subject: 'usr_failover' },
        ),
      );
      await eventually('a confirmed write once the standby is back', () => store.appendAuditEvent(draft()));
    } finally {
      await store.close();
    }
  });

  test('sync-rep-wait-cancelled on a sign-in: a session (one statement of its own) the standby never confirmed is not acknowledged', async () => {
    const store = await openPostgresStore({ connectionString: rp.url, schema: 'unconfirmed_session', max: 2, allowUnauthenticated: true });
    try {
      const session = await enrolledDevice(store, 'usr_signin', 'cf');
      const pair = pairOf('a', 'b');
      const create = (id: string) => store.createSession(session(id), pair, { ...draft(), type: 'session.created', sessionId: id });
      await cancelledWhileWaitingForTheStandby(() => create('ses_01JDZ0000000000000000000AC'));
      assert.equal(
        await eventually('a confirmed sign-in once the standby is back', () => create('ses_01JDZ0000000000000000000AD')),
        'created',
      );
      // The refused one was committed on the primary all the same: what a failover would have lost.
      assert.equal((await store.getSession('ses_01JDZ0000000000000000000AC'))?.subject, 'usr_signin');
    } finally {
      await store.close();
    }
  });

  test('sync-rep-wait-cancelled on a refresh: a rotation (one statement of its own) the standby never confirmed is not acknowledged', async () => {
    const store = await openPostgresStore({ connectionString: rp.url, schema: 'unconfirmed_rotation', max: 2, allowUnauthenticated: true });
    try {
      const session = (await enrolledDevice(store, 'usr_rotation', 'ce'))('ses_01JDZ0000000000000000000AB');
      const digest = (c: string) => c.repeat(64);
      const pair = pairOf('a', 'b');
      assert.equal(await store.createSession(session, pair, { ...draft(), type: 'session.created', sessionId: session.id }), 'created');
      const rotate = (next: string) =>
        store.rotateRefreshToken(
          {
            sessionId: session.id,
            presentedDigest: digest('b'),
            realm: 'management',
            now: NOW + 1000,
            graceMs: 10_000,
            next: { ...pair, accessDigest: digest(next), refreshDigest: digest(next.toUpperCase()) },
            sealedSuccessor: `sealed-${next}`,
          },
          (o) => ({ ...draft(), type: o.kind === 'rotated' ? 'session.rotated' : 'session.rotated_in_grace', sessionId: session.id }),
        );
      await cancelledWhileWaitingForTheStandby(() => rotate('c'));
      // The caller, told nothing was done, presents its token again within grace: it is given the
      // pair the unconfirmed rotation issued (committed on the primary), now confirmed.
      const again = await eventually('a confirmed refresh once the standby is back', () => rotate('d'));
      assert.equal(again.kind, 'rotated_in_grace');
      assert.equal(again.kind === 'rotated_in_grace' ? again.sealedSuccessor : null, 'sealed-c');
    } finally {
      await store.close();
    }
  });

  test('sync-rep-wait-cancelled under a German lc_messages: the warning, translated, still refuses the commit the standby never confirmed', async (t) => {
    // PostgreSQL translates the warning's text (`storniere Warten auf synchrone Replikation ...`)
    // for a server or role whose lc_messages names another language; its routine field does not
    // change. Needs the de_DE.UTF-8 locale (.ci/run makes it).
    const german = execFileSync('locale', ['-a'], { encoding: 'utf8' })
      .split('\n')
      .some((l) => /^de_DE\.utf-?8$/i.test(l));
    if (!german) {
      if (process.env.CI) assert.fail('the de_DE.UTF-8 locale is missing (localedef -i de_DE -f UTF-8 de_DE.UTF-8)');
      t.skip('the de_DE.UTF-8 locale is missing (under CI this fails instead)');
      return;
    }
    const admin = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${rp.primaryPort}/postgres` });
    await admin.connect();
    await admin.query("ALTER DATABASE postgres SET lc_messages TO 'de_DE.UTF-8'");
    try {
      const store = await openPostgresStore({ connectionString: rp.url, schema: 'unconfirmed_german', max: 2, allowUnauthenticated: true });
      try {
        const session = await enrolledDevice(store, 'usr_german', 'c9');
        const create = (id: string) =>
          store.createSession(session(id), pairOf('a', 'b'), { ...draft(), type: 'session.created', sessionId: id });
        // The store's connections do speak German: a refused statement's message is translated.
        const probe = new pg.Client({ connectionString: `postgres://postgres@127.0.0.1:${rp.primaryPort}/postgres` });
        await probe.connect();
        try {
          await assert.rejects(probe.query('SELECT 1/0'), (err: Error) => /Division durch Null/.test(err.message));
        } finally {
          await probe.end();
        }
        await cancelledWhileWaitingForTheStandby(() => create('ses_01JDZ0000000000000000000AE'));
        assert.equal(
          await eventually('a confirmed sign-in once the standby is back', () => create('ses_01JDZ0000000000000000000AF')),
          'created',
        );
      } finally {
        await store.close();
      }
    } finally {
      await admin.query('ALTER DATABASE postgres RESET lc_messages');
      await admin.end();
    }
  });

  test('the primary killed and the standby promoted: operations fail as store faults, then the same store writes on the new primary by itself', async () => {
    let store: PostgresStore | undefined = await openPostgresStore({
      connectionString: rp.url,
      schema: 'failover',
      max: 4,
      allowUnauthenticated: true,
    });
    try {
      const acked: string[] = [];
      for (let i = 0; i < 20; i++) acked.push((await store.appendAuditEvent(draft())).id);
      rp.killPrimary();
      await assert.rejects(store.appendAuditEvent(draft()), (err: unknown) => storeFaultOf(err) === 'connection');
      await assert.rejects(store.ping(), (err: unknown) => storeFaultOf(err) === 'connection', 'only a standby left: no read-write host');
      await rp.promote();
      const after = await eventually('a write on the promoted standby', () => store?.appendAuditEvent(draft()) as Promise<unknown>);
      assert.ok(after);
      for (const id of acked) assert.equal(await count(rp.standbyUrl, 'failover', id), 1, `acknowledged event ${id} survived the failover`);
      await store.ping();
    } finally {
      await store?.close();
      store = undefined;
    }
  });
});
