import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { cleanEnv, problemCode, type ServerProcess, startServer, tempDir } from '../helpers.js';
// The store is the subject here, and the service (`auth serve`) is the installed `svc`, spawned;
// the operator's and client's commands, whose process boundary is not the subject, run in
// process (svcInProcess): a spawn costs a Node start and the CLI's modules on a 2-core machine.
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';
import {
  createSchemas,
  dpopProofFor,
  loginOverHttp,
  me,
  PG_URL,
  refresh,
  revoke,
  writePostgresProject,
} from '../support/store-projects.js';

/** What a client and an operator observe in the short flow: must not depend on the store. */
interface Observed {
  whoamiRealm: string;
  whoamiIsTheSession: boolean;
  refreshedKeepsSession: boolean;
  retiredAccess: [number, string];
  rotatedAccess: number;
  adminRevoke: number;
  revokedAccess: [number, string];
  revokedRefresh: [number, string];
  whoamiAfterRevoke: number;
  logoutAfterRevoke: number;
  ownLogout: number;
  loggedOutAccess: [number, string];
  auditVerify: number;
  auditTypes: string[];
}

/** `svc auth audit <dir> --json` in process, parsed: one event per line (as `auditEvents` of `support/store-projects.ts`). */
async function auditEvents(dir: string, env: NodeJS.ProcessEnv): Promise<{ type: string }[]> {
  const out = (await svcOk(['auth', 'audit', dir, '--json'], { env })).stdout.trim();
  return out === '' ? [] : out.split('\n').map((l) => JSON.parse(l) as { type: string });
}

async function schemaExists(schema: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query('SELECT 1 FROM information_schema.schemata WHERE schema_name = $1', [schema])).rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('a project runs on either store with the same behaviour', () => {
  const tmp = tempDir('svc-store-choice-');
  const schemas = createSchemas();
  const servers: ServerProcess[] = [];
  const observed = new Map<string, Observed>();
  after(async () => {
    for (const s of servers) await s.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  const stores: { name: string; prepare: (root: string, env: NodeJS.ProcessEnv) => Promise<void> }[] = [
    // No project.edn: `svc auth init` writes the default, embedded SQLite store.
    { name: 'sqlite', prepare: async () => undefined },
    {
      name: 'postgres',
      prepare: async (root, env) => {
        await writePostgresProject(root, { schema: schemas.fresh(), env });
      },
    },
  ];

  for (const store of stores) {
    test(`on ${store.name}: init, enroll, serve, login, me, refresh, revoke and audit verify all behave as the contract says`, async () => {
      const root = join(tmp.dir, store.name);
      const creds = join(root, 'creds.json');
      const env = cleanEnv({ HOME: root, SVC_CREDENTIALS: creds });
      await store.prepare(root, env);
      const p = await enrolledProject(root, { env });
      const server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', p.dir], { env });
      servers.push(server);
      const status = async (res: Response): Promise<[number, string]> => [res.status, await problemCode(res)];

      await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.url], { env });
      const first = currentCredentials(creds) as { session_id: string; access_token: string; refresh_token: string };
      const whoami = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout) as { realm: string; session: string };

      await svcOk(['auth', 'refresh'], { env });
      const second = currentCredentials(creds) as { session_id: string; access_token: string; refresh_token: string };

      const o: Partial<Observed> = {
        whoamiRealm: whoami.realm,
        whoamiIsTheSession: whoami.session === first.session_id,
        refreshedKeepsSession: second.session_id === first.session_id && second.refresh_token !== first.refresh_token,
        retiredAccess: await status(await me(server.url, first.access_token)),
        rotatedAccess: (await me(server.url, second.access_token)).status,
      };

      // An admin (a second session of the same device) revokes the CLI's session.
      const admin = await loginOverHttp(server.url, p.keyFile, p.publicKey);
      const revoked = await revoke(server.url, admin.access_token, second.session_id);
      o.adminRevoke = revoked.status;
      await revoked.body?.cancel();
      o.revokedAccess = await status(await me(server.url, second.access_token));
      // With a proof by the key the CLI signed in with (its session is bound to it): refused as revoked.
      o.revokedRefresh = await status(
        await refresh(server.url, second.refresh_token, dpopProofFor(p.keyFile, 'POST', `${server.url}/v1/auth/refresh`)),
      );
      o.whoamiAfterRevoke = (await svc(['auth', 'whoami'], { env })).code;
      o.logoutAfterRevoke = (await svc(['auth', 'logout'], { env })).code;

      const own = await revoke(server.url, admin.access_token);
      o.ownLogout = own.status;
      await own.body?.cancel();
      o.loggedOutAccess = await status(await me(server.url, admin.access_token));

      const verify = await svc(['auth', 'audit', 'verify', p.dir], { env });
      assert.match(verify.stdout, /^audit chain ok: \d+ events/);
      o.auditVerify = verify.code;
      o.auditTypes = (await auditEvents(p.dir, env)).map((e) => e.type);

      // The contract, on this store.
      assert.deepEqual(o, {
        whoamiRealm: 'management',
        whoamiIsTheSession: true,
        refreshedKeepsSession: true,
        retiredAccess: [401, 'invalid_token'],
        rotatedAccess: 200,
        adminRevoke: 200,
        revokedAccess: [401, 'invalid_token'],
        revokedRefresh: [401, 'invalid_refresh_token'],
        whoamiAfterRevoke: 1,
        logoutAfterRevoke: 0,
        ownLogout: 200,
        loggedOutAccess: [401, 'invalid_token'],
        auditVerify: 0,
        auditTypes: o.auditTypes,
      });
      observed.set(store.name, o as Observed);
    });
  }

  test('sqlite and postgres observed exactly the same outcomes and audit trail', () => {
    const sqlite = observed.get('sqlite');
    const postgres = observed.get('postgres');
    assert.ok(sqlite && postgres, 'both store flows ran');
    assert.ok(sqlite.auditTypes.includes('session.revoked'));
    assert.deepEqual(postgres, sqlite);
  });
});

describe('store secrets in project.edn are references, never values', () => {
  const tmp = tempDir('svc-store-secret-');
  const schemas = createSchemas();
  after(async () => {
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('a literal :store/password is refused at load naming the key (exit 1), without echoing it, and creates no schema', async () => {
    const root = join(tmp.dir, 'literal');
    const schema = schemas.fresh();
    const env = cleanEnv({ HOME: root });
    const dir = await writePostgresProject(root, { schema, storeConfig: ':store/password "literal-pg-password-1234"', env });
    for (const args of [
      ['auth', 'init', dir],
      ['auth', 'devices', dir],
    ]) {
      const r = await svc(args, { env });
      assert.equal(r.code, 1, r.stderr);
      assert.ok(r.stderr.includes(':store/password'), r.stderr);
      assert.ok(r.stderr.includes(join(dir, 'project.edn')), r.stderr);
      assert.equal(r.stderr.includes('literal-pg-password-1234'), false, 'the secret is not echoed');
    }
    assert.equal(await schemaExists(schema), false, 'the store was never opened');
  });

  test('a :store/password env reference that is not set fails as one line naming it; set, the same project initialises', async () => {
    const root = join(tmp.dir, 'env-ref');
    const schema = schemas.fresh();
    const variable = 'STORE_CHOICE_TEST_PG_PASSWORD';
    const unset = cleanEnv({ HOME: root, [variable]: undefined });
    const dir = await writePostgresProject(root, { schema, storeConfig: `:store/password #svc/secret "env:${variable}"`, env: unset });
    const r = await svc(['auth', 'init', dir], { env: unset });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.ok(r.stderr.includes(`env:${variable}`), r.stderr);
    assert.equal(await schemaExists(schema), false, 'the store was never opened');
    // The server trusts local connections, so any value works: the reference was the only problem.
    await svcOk(['auth', 'init', dir], { env: cleanEnv({ HOME: root, [variable]: 'any-value' }) });
    assert.equal(await schemaExists(schema), true);
  });

  test('a PostgreSQL server that lets the store role in without a password is refused (exit 1, one line) unless :store/allow-unauthenticated, then warned about on every command', async () => {
    const root = join(tmp.dir, 'trust');
    const schema = schemas.fresh();
    const env = cleanEnv({ HOME: root });
    const dir = await writePostgresProject(root, { schema, env });
    const file = join(dir, 'project.edn');
    const accepted = readFileSync(file, 'utf8');
    writeFileSync(file, accepted.replace(':store/allow-unauthenticated true', ''));
    const refused = await svc(['auth', 'init', dir], { env });
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
    assert.match(refused.stderr, /:store\/allow-unauthenticated/);
    assert.equal(await schemaExists(schema), false, 'nothing was created on the refused server');
    writeFileSync(file, accepted);
    for (const args of [
      ['auth', 'init', '--json', dir],
      ['auth', 'devices', dir],
    ]) {
      const r = await svcOk(args, { env });
      const warnings = r.stderr
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { event?: string; level?: number });
      assert.ok(
        warnings.some((w) => w.event === 'store.unauthenticated_role' && w.level === 40),
        `${args.join(' ')} logs the acceptance at warn: ${r.stderr}`,
      );
    }
  });
});
