import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type ReplicatedPostgres, startReplicatedPostgres } from '../../../store-postgres/test/replicated-postgres.js';
import { cleanEnv, enrolledProject, type StartedProcess, svcOk, tempDir, waitUntil } from '../helpers.js';
import { callJson, type ServedUrls, serveAll } from '../support/serve-all.js';
import { loginOverHttp, me, refresh, revoke, type TokenPair, writePostgresProject } from '../support/store-projects.js';

const SCHEMA = 'svc_failover';

/** What the load was told was done (a 2xx answer): each must be in the store after the failover. */
interface Acknowledged {
  /** Session id -> rotations acknowledged (its generation is at least this). */
  readonly sessions: Map<string, number>;
  /** Session id -> its access token, for sessions whose logout was acknowledged. */
  readonly revoked: Map<string, string>;
  /** Subject -> the name it was created or last acknowledged with. */
  readonly users: Map<string, string>;
}

/**
 * Two `svc serve` nodes given a PostgreSQL primary and its synchronous standby as one libpq host
 * list (`target_session_attrs=read-write`), under a load of sign-ins, rotations, revocations and
 * user changes; the primary is killed mid-load and the standby promoted (docs/deployment.md, "A
 * cluster").
 */
describe('svc serve nodes through a PostgreSQL failover (primary killed, synchronous standby promoted; started by this file)', () => {
  const tmp = tempDir('svc-pg-failover-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  let rp: ReplicatedPostgres;
  let project: { dir: string; keyFile: string; publicKey: string };
  const nodes: StartedProcess<ServedUrls>[] = [];
  before(async () => {
    rp = await startReplicatedPostgres();
    await writePostgresProject(tmp.dir, { schema: SCHEMA, env, url: rp.url });
    project = await enrolledProject(tmp.dir, { env });
    for (let i = 0; i < 2; i++) nodes.push(await serveAll(project.dir, env));
  });
  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    try {
      await rp?.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('no acknowledged write is lost, nothing answers 500, the nodes stay up and recover by themselves', async (t) => {
    const ack: Acknowledged = { sessions: new Map(), revoked: new Map(), users: new Map() };
    const statuses = new Map<string, number>();
    const note = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);
    let requests = 0;
    let acked = 0;
    let lastAckAt = 0;
    let running = true;
    let killedAt = 0;

    /** One answer: counted; a 2xx is an acknowledgement, anything else is noted with its code. */
    const answered = async (what: string, res: Response): Promise<boolean> => {
      requests++;
      if (res.status >= 200 && res.status < 300) return true;
      const body = (await res.json().catch(() => ({}))) as { code?: string };
      note(`${what} ${res.status} ${body.code ?? '-'}`);
      return false;
    };
    const acknowledge = () => {
      acked++;
      lastAckAt = Date.now();
    };

    // 12 clients over both nodes: sign in, rotate, create and rename a user, log out every other cycle.
    const client = async (i: number) => {
      const urls = nodes[i % nodes.length]?.ready as ServedUrls;
      for (let cycle = 0; running; cycle++) {
        try {
          let pair: TokenPair;
          try {
            requests += 2;
            pair = await loginOverHttp(urls.management, project.keyFile, project.publicKey);
          } catch (err) {
            const m = /^(challenge|session): (\d+) .*"code":"([a-z_]+)"/s.exec(String((err as Error).message));
            if (m === null) throw err;
            note(`sign-in ${m[2]} ${m[3]}`);
            await new Promise((r) => setTimeout(r, 50));
            continue;
          }
          ack.sessions.set(pair.session_id, 0);
          acknowledge();
          const rotated = await refresh(urls.management, pair.refresh_token);
          if (!(await answered('refresh', rotated))) continue;
          pair = (await rotated.json()) as TokenPair;
          ack.sessions.set(pair.session_id, 1);
          acknowledge();
          const created = await callJson(`${urls.management}/v1/auth/users`, 'POST', pair.access_token, {
            realm: 'application',
            name: `load ${i}.${cycle}`,
          });
          requests++;
          if (created.status !== 201) {
            note(`create-user ${created.status} ${created.body?.code ?? '-'}`);
            continue;
          }
          const subject = created.body.user.subject as string;
          ack.users.set(subject, `load ${i}.${cycle}`);
          acknowledge();
          const renamed = await callJson(`${urls.management}/v1/auth/users/${subject}`, 'PATCH', pair.access_token, {
            name: `renamed ${i}.${cycle}`,
          });
          requests++;
          if (renamed.status !== 200) {
            // Not acknowledged: either name may be there.
            ack.users.delete(subject);
            note(`rename-user ${renamed.status} ${renamed.body?.code ?? '-'}`);
            continue;
          }
          ack.users.set(subject, `renamed ${i}.${cycle}`);
          acknowledge();
          if (cycle % 2 === 0) {
            const out = await revoke(urls.management, pair.access_token);
            if (!(await answered('revoke', out))) continue;
            ack.revoked.set(pair.session_id, pair.access_token);
            acknowledge();
          }
        } catch (err) {
          // A refused or reset connection: the node is gone (or hung up); never expected.
          requests++;
          note(`network ${String((err as Error).cause ?? err)}`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    };
    const clients = Array.from({ length: 12 }, (_, i) => client(i));
    let promotedAt = 0;
    let firstAckAfterPromotion = 0;
    try {
      await waitUntil('100 acknowledged writes before the primary is killed', () => acked >= 100, { ms: 120_000 });
      rp.killPrimary();
      killedAt = Date.now();
      const ackedAtKill = acked;
      // The switch: an operator (or a failover manager) notices and promotes the standby.
      await waitUntil('a 503 from the nodes after the primary died', () => [...statuses.keys()].some((k) => / 503 /.test(k)), {
        ms: 30_000,
      });
      await new Promise((r) => setTimeout(r, 1_000));
      await rp.promote();
      promotedAt = Date.now();
      const ackedAtPromotion = acked;
      await waitUntil(
        'the first acknowledged write after the promotion (the nodes reconnect by themselves)',
        () => acked > ackedAtPromotion && lastAckAt > promotedAt,
        { ms: 30_000 },
      );
      firstAckAfterPromotion = lastAckAt;
      await waitUntil('100 more acknowledged writes on the promoted standby', () => acked >= ackedAtPromotion + 100, { ms: 120_000 });
      t.diagnostic(`acknowledged before the kill ${ackedAtKill}, between kill and promotion ${ackedAtPromotion - ackedAtKill}`);
    } finally {
      running = false;
      await Promise.all(clients);
    }

    for (const n of nodes) assert.equal(n.child.exitCode, null, `a node died: ${n.stderr().slice(-2000)}`);

    // Every acknowledged write, read back from the promoted standby (now the only server).
    const db = new pg.Client({ connectionString: rp.standbyUrl });
    await db.connect();
    const lost: string[] = [];
    try {
      const sessions = new Map(
        (
          await db.query<{ id: string; generation: number; revoked: boolean }>(
            `SELECT id, generation, revoked_at IS NOT NULL AS revoked FROM ${SCHEMA}.sessions`,
          )
        ).rows.map((r) => [r.id, r]),
      );
      for (const [id, rotations] of ack.sessions) {
        const row = sessions.get(id);
        if (row === undefined) lost.push(`session ${id}`);
        else if (row.generation < rotations) lost.push(`rotation of ${id} (generation ${row.generation} < ${rotations})`);
      }
      for (const id of ack.revoked.keys()) if (sessions.get(id)?.revoked !== true) lost.push(`revocation of ${id}`);
      const users = new Map(
        (await db.query<{ subject: string; name: string }>(`SELECT subject, name FROM ${SCHEMA}.users`)).rows.map((r) => [
          r.subject,
          r.name,
        ]),
      );
      for (const [subject, name] of ack.users)
        if (users.get(subject) !== name) lost.push(`user ${subject} ${name} (found ${users.get(subject)})`);
    } finally {
      await db.end();
    }

    // What a client sees: the access token of an acknowledged logout is refused on both nodes.
    const sample = [...ack.revoked.values()].slice(-5);
    assert.ok(sample.length > 0, 'logouts were acknowledged');
    for (const token of sample) {
      for (const n of nodes) assert.equal((await me(n.ready.management, token)).status, 401, 'a logged-out token is refused on every node');
    }
    const verify = await svcOk(['auth', 'audit', 'verify', project.dir], { env });
    assert.match(verify.stdout, /^audit chain ok: \d+ events/);

    const fivexx = new Map<number, number>();
    for (const [k, n] of statuses) {
      const status = Number(k.split(' ')[1]);
      if (status >= 500) fivexx.set(status, (fivexx.get(status) ?? 0) + n);
    }
    const figures = {
      requests,
      acknowledged_writes: acked,
      acknowledged_sessions: ack.sessions.size,
      acknowledged_revocations: ack.revoked.size,
      acknowledged_users: ack.users.size,
      lost: lost.length,
      fivexx_by_status: Object.fromEntries(fivexx),
      refusals: Object.fromEntries(statuses),
      seconds_kill_to_promotion: (promotedAt - killedAt) / 1000,
      seconds_promotion_to_first_write: (firstAckAfterPromotion - promotedAt) / 1000,
      seconds_kill_to_first_write: (firstAckAfterPromotion - killedAt) / 1000,
    };
    t.diagnostic(`failover figures: ${JSON.stringify(figures)}`);
    assert.deepEqual(lost, [], 'every acknowledged write is on the promoted standby');
    const unexpected = [...statuses.keys()].filter((k) => !/ 503 store_unavailable$/.test(k));
    assert.deepEqual(
      unexpected,
      [],
      'the only refusals during the switch are 503 store_unavailable (never a 500, never a dropped connection)',
    );
    assert.ok((fivexx.get(503) ?? 0) > 0, 'the switch was seen by the clients');
    assert.ok(figures.seconds_promotion_to_first_write < 30, 'the nodes recovered by themselves within 30 s of the promotion');
    for (const n of nodes) {
      const health = await fetch(`${n.ready.node}/edge/0-alpha/health`);
      assert.equal(health.status, 200, 'node health is ok again');
      await health.body?.cancel();
    }
  });
});
