import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { auditDraft, digestToken, mintSessionToken, newId, type Realm } from '@svc/core';
import { type LinkRecord, newSessionRecord } from '@svc/core/store';
import { openSqliteStore } from 'svc-store-sqlite';
import { cleanEnv, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';

const deps = { clock: { now: Date.now }, random: (n: number) => new Uint8Array(randomBytes(n)) };

/**
 * Plants a link and a session it signed in, in the project's store, as a provider sign-in
 * leaves them (the gateway's routes that make them are another step): answers the link and the
 * session's access token.
 */
async function plantLinkSession(dir: string, realm: Realm, subject: string, externalSubject: string) {
  const store = await openSqliteStore({ file: join(dir, '.svc', 'control', 'control.db') });
  try {
    const now = Date.now();
    const link: LinkRecord = {
      id: newId('link', deps.clock, deps.random),
      realm,
      subject,
      provider: 'corp',
      issuer: 'https://login.example.com',
      externalSubject,
      credentialData: null,
      counter: null,
      name: `${externalSubject}@example.com`,
      createdAt: now,
      lastUsedAt: null,
      removedAt: null,
    };
    await store.createLink(link, auditDraft(deps, 'link.created', { realm, subject, deviceId: link.id, data: { provider: 'corp' } }));
    const sessionId = newId('session', deps.clock, deps.random);
    const access = mintSessionToken('access', sessionId, deps.random);
    const refresh = mintSessionToken('refresh', sessionId, deps.random);
    const pair = {
      accessDigest: digestToken(access),
      refreshDigest: digestToken(refresh),
      accessExpiresAt: now + 600_000,
      refreshExpiresAt: now + 3_600_000,
    };
    const session = newSessionRecord({ id: sessionId, device: link, now, expiresAt: now + 86_400_000, pair, amr: ['fed'] });
    const outcome = await store.createLinkSession({ session, pair, counter: null, now }, [
      auditDraft(deps, 'provider.signin', { realm, subject, deviceId: link.id, sessionId }),
      auditDraft(deps, 'session.created', { realm, subject, deviceId: link.id, sessionId, data: { amr: 'fed' } }),
    ]);
    assert.deepEqual(outcome, { kind: 'created' });
    return { link, access };
  } finally {
    await store.close();
  }
}

describe('svc auth links: the operator lists and removes links (offline, while the server runs)', () => {
  const tmp = tempDir();
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  let server: ServerProcess | undefined;
  let p: Awaited<ReturnType<typeof enrolledProject>>;
  let admin: string;

  before(async () => {
    p = await enrolledProject(tmp.dir, { env });
    const devices = JSON.parse((await svcOk(['auth', 'devices', p.dir, '--json'], { env })).stdout).devices as { subject: string }[];
    admin = devices[0]?.subject ?? '';
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('links are listed (by realm and subject), without credential data; none is "no links"', async () => {
    assert.match((await svcOk(['auth', 'links', p.dir], { env })).stdout, /no links/);
    const { link } = await plantLinkSession(p.dir, 'management', admin, 'root');
    await plantLinkSession(p.dir, 'application', 'sub_01KAQ0000000000000000000S1', 'ann');
    const all = JSON.parse((await svcOk(['auth', 'links', p.dir, '--json'], { env })).stdout).links;
    assert.equal(all.length, 2);
    const mine = JSON.parse(
      (await svcOk(['auth', 'links', p.dir, '--json', '--realm', 'management', '--subject', admin], { env })).stdout,
    ).links;
    assert.deepEqual(
      mine.map((l: { id: string }) => l.id),
      [link.id],
    );
    assert.deepEqual(Object.keys(mine[0]).sort(), [
      'created_at',
      'external_subject',
      'id',
      'issuer',
      'last_used_at',
      'name',
      'provider',
      'realm',
      'subject',
    ]);
    const table = (await svcOk(['auth', 'links', p.dir, '--realm', 'application'], { env })).stdout;
    assert.match(table, /^ID +REALM +SUBJECT +PROVIDER/);
    assert.match(table, /ann@example\.com/);
    assert.doesNotMatch(table, /root@example\.com/);
  });

  test('links remove revokes the sessions the link signed in, at once in the running server, audited as link.removed', async () => {
    assert.ok(server);
    const { link, access } = await plantLinkSession(p.dir, 'management', admin, 'ops');
    const me = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${access}` } });
    assert.equal(me.status, 200);
    const removed = JSON.parse((await svcOk(['auth', 'links', 'remove', link.id, p.dir, '--json'], { env })).stdout);
    assert.deepEqual(removed, { link_id: link.id, removed: true, revoked_sessions: 1 });
    const after = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${access}` } });
    assert.equal(after.status, 401);
    const last = JSON.parse((await svcOk(['auth', 'audit', p.dir, '--json'], { env })).stdout.trim().split('\n').at(-1) ?? '{}');
    assert.equal(last.type, 'link.removed');
    assert.equal(last.device_id, link.id);
    assert.equal(last.data.by_subject, 'operator-cli');
    assert.equal(
      JSON.parse((await svcOk(['auth', 'links', p.dir, '--json'], { env })).stdout).links.some((l: { id: string }) => l.id === link.id),
      false,
    );
    const again = await svc(['auth', 'links', 'remove', link.id, p.dir], { env });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /\(not_found\)/);
  });

  test('a malformed link id or subject is a usage error (exit 2)', async () => {
    assert.equal((await svc(['auth', 'links', 'remove', 'dev_01KAQ0000000000000000000S1', p.dir], { env })).code, 2);
    assert.equal((await svc(['auth', 'links', p.dir, '--subject', 'ann'], { env })).code, 2);
    assert.equal((await svc(['auth', 'links', p.dir, '--realm', 'nowhere'], { env })).code, 2);
  });
});
