import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { checkProviderIdentity, type ProviderHandle } from '@svc/core';
import { ProviderError } from '@svc/provider-host';
import { startPrivatePostgres } from '../../../store-postgres/test/private-postgres.js';
import {
  type ControlProject,
  captureLog,
  createControlProject,
  ctxOf,
  finishInput,
  ISSUER,
  policyOf,
  startFixture,
} from '../support/fixtures.js';

// Each test runs a hostile provider package, confined as the service runs it, and shows the
// attack fails. Every hostile package succeeds when the child runs without the permission
// model and with the parent's environment (checked once by hand, see the report of #13): the
// assertions below are what the confinement adds, not what the fixture cannot do anyway.

let project: ControlProject;
before(async () => {
  project = await createControlProject();
});
after(() => project.remove());

/** Runs `fn` with a started fixture and closes it whatever happens. */
async function withFixture<T>(handle: Promise<ProviderHandle>, fn: (h: ProviderHandle) => Promise<T>): Promise<T> {
  const h = await handle;
  try {
    return await fn(h);
  } finally {
    await h.close();
  }
}

/** Asserts `promise` rejects with a ProviderError of `reason` whose message matches `pattern`. */
async function refused(promise: Promise<unknown>, reason: ProviderError['reason'], pattern: RegExp): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ProviderError, `not a ProviderError: ${String(err)}`);
    assert.equal(err.reason, reason, err.message);
    assert.match(err.message, pattern);
    return true;
  });
}

test('a provider that reads the control database is denied by the permission model', async () => {
  assert.equal(readFileSync(project.controlDb).subarray(0, 15).toString('latin1'), 'SQLite format 3', 'the control database is real');
  await withFixture(startFixture('reads-control-database', { target: project.controlDb }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted/);
  });
});

test('a provider that imports the store or its driver from the service’s node_modules cannot load them', async () => {
  const storePath = createRequire(import.meta.url).resolve('svc-store-sqlite');
  assert.ok(existsSync(storePath));
  await withFixture(startFixture('imports-the-store', { how: 'store-by-name', target: project.controlDb, storePath }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted|Cannot find package/);
  });
  await withFixture(startFixture('imports-the-store', { how: 'driver-by-name', target: project.controlDb, storePath }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted|Cannot find package/);
  });
  await withFixture(startFixture('imports-the-store', { how: 'store-by-path', target: project.controlDb, storePath }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted/);
  });
});

test('a provider that writes a file is denied, and the file does not appear', async () => {
  const target = join(project.dir, 'written-by-provider');
  await withFixture(startFixture('writes-a-file', { target }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted/);
  });
  assert.equal(existsSync(target), false);
});

test('a provider that spawns a process is denied, and the process never runs', async () => {
  const target = join(project.dir, 'written-by-shell');
  await withFixture(startFixture('spawns-a-process', { target }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted/);
  });
  assert.equal(existsSync(target), false);
});

test('a provider that starts a worker thread is denied', async () => {
  await withFixture(startFixture('starts-a-worker', {}), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'provider_error', /ERR_ACCESS_DENIED|restricted/);
  });
});

test('a provider learns none of the PostgreSQL store’s credentials (PGPASSWORD, the store password’s variable, the parent’s environ), so it cannot connect as the store', async () => {
  // #24.7: the service resolves `:store/password #svc/secret "env:NAME"` from its own
  // environment, and libpq-style variables may be set for it: none may reach a provider child.
  const password = `pg-password-${randomBytes(8).toString('hex')}`;
  const names = ['PGPASSWORD', 'SVC_PG_PASSWORD', 'PGUSER', 'PGPASSFILE'] as const;
  for (const name of names) process.env[name] = name === 'PGUSER' ? 'svc_store_role' : password;
  try {
    await withFixture(startFixture('reads-the-environment', {}), async (h) => {
      const { identity } = await h.finish(ctxOf(), finishInput());
      const seen = JSON.stringify(identity.claims);
      assert.ok(!seen.includes(password), 'a store credential reached the provider');
      assert.ok(!seen.includes('svc_store_role'), 'the store role reached the provider');
      assert.equal(identity.claims.env, '{}');
      assert.match(String(identity.claims.parent_env), /^denied: ERR_ACCESS_DENIED/);
    });
  } finally {
    for (const name of names) delete process.env[name];
  }
});

test('a confined provider reaches PostgreSQL over the network: a trust server lets it in as the store role, a scram one asks it for the password it cannot have', async () => {
  // Why the store refuses a trust server (#24.7, store-postgres/test/real/unauthenticated-role.test.ts):
  // the permission model does not stop this connection; only the server's authentication does.
  const shared = new URL(process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test');
  const password = `pg-${randomBytes(8).toString('hex')}`;
  const scram = await startPrivatePostgres({ password });
  process.env.PGPASSWORD = password;
  try {
    const target = (host: string, port: number, database: string) => ({
      'pg/host': host,
      'pg/port': port,
      'pg/user': 'postgres',
      'pg/database': database,
    });
    await withFixture(
      startFixture('connects-to-postgres', target(shared.hostname, Number(shared.port || 5432), shared.pathname.slice(1))),
      async (h) => {
        assert.deepEqual(await h.health(), { status: 'ok', detail: 'trusted' });
      },
    );
    await withFixture(startFixture('connects-to-postgres', target('127.0.0.1', scram.port, 'postgres')), async (h) => {
      assert.deepEqual(await h.health(), { status: 'ok', detail: 'password required (10)' });
    });
  } finally {
    delete process.env.PGPASSWORD;
    await scram.dispose();
  }
});

test('a provider that reads the environment, its arguments or the parent’s /proc environ learns no secret', async () => {
  const parentSecret = `parent-secret-${randomBytes(8).toString('hex')}`;
  const configSecret = `config-secret-${randomBytes(8).toString('hex')}`;
  process.env.SVC_PROVIDER_HOST_TEST_SECRET = parentSecret;
  const log = captureLog();
  try {
    await withFixture(startFixture('reads-the-environment', { 'oidc/client-secret': configSecret }, { log }), async (h) => {
      const { identity } = await h.finish(ctxOf(), finishInput());
      const seen = JSON.stringify(identity.claims);
      assert.ok(!seen.includes(parentSecret), 'the parent environment reached the provider');
      assert.ok(!seen.includes(configSecret), 'the configuration was in the arguments or environment');
      assert.equal(identity.claims.env, '{}');
      assert.match(String(identity.claims.parent_env), /^denied: ERR_ACCESS_DENIED/);
      assert.equal(identity.claims.cwd, '/');
    });
  } finally {
    delete process.env.SVC_PROVIDER_HOST_TEST_SECRET;
  }
  // The fixture printed its configuration: the host's log has it redacted.
  const logged = log.lines.join('\n');
  assert.match(logged, /\[redacted\]/);
  assert.ok(!logged.includes(configSecret), 'a configuration secret reached the log');
});

test('a provider that returns a forged principal, session or access token beside the identity is refused by shape', async () => {
  for (const forge of ['principal', 'session', 'access_token']) {
    await withFixture(startFixture('forges-a-principal', { forge, where: 'answer' }), async (h) => {
      await refused(
        h.finish(ctxOf(), finishInput()),
        'malformed_answer',
        new RegExp(`field "${forge}", which the contract does not allow`),
      );
    });
  }
  for (const forge of ['realm', 'principal']) {
    await withFixture(startFixture('forges-a-principal', { forge, where: 'identity' }), async (h) => {
      await refused(h.finish(ctxOf(), finishInput()), 'malformed_answer', new RegExp(`the identity has the field "${forge}"`));
    });
  }
});

test('a provider that returns a disallowed issuer, or signs in to a realm its policy does not name, is refused by core’s policy', async () => {
  const policy = policyOf({ realms: ['application'], allowedIssuers: [ISSUER] });
  const answer = (identity: unknown) => startFixture('returns-any-identity', { identity } as never, { policy });
  // The positive control: a well-formed identity of the allowed issuer, in the allowed realm.
  await withFixture(answer({ issuer: ISSUER, subject: 'alice', claims: {} }), async (h) => {
    const { identity } = await h.finish(ctxOf('application'), finishInput());
    assert.equal(checkProviderIdentity(h.policy, 'application', identity), null);
    // The same answer for a ceremony in the management realm: another realm's subject.
    assert.match(checkProviderIdentity(h.policy, 'management', identity) ?? '', /management realm/);
  });
  await withFixture(answer({ issuer: 'https://evil.example', subject: 'alice', claims: {} }), async (h) => {
    const { identity } = await h.finish(ctxOf('application'), finishInput());
    assert.match(checkProviderIdentity(h.policy, 'application', identity) ?? '', /issuer is not allowed/);
  });
  await withFixture(answer({ issuer: ISSUER, subject: 'admin\u202e', claims: {} }), async (h) => {
    const { identity } = await h.finish(ctxOf('application'), finishInput());
    assert.match(checkProviderIdentity(h.policy, 'application', identity) ?? '', /subject is not printable/);
  });
  // Malformed rather than refused: a subject that is not a string never leaves the host.
  await withFixture(answer({ issuer: ISSUER, subject: 42, claims: {} }), async (h) => {
    await refused(h.finish(ctxOf('application'), finishInput()), 'malformed_answer', /the subject is not a string/);
  });
  await withFixture(answer({ issuer: ISSUER, subject: 'alice', claims: { groups: [{ admin: true }] } }), async (h) => {
    await refused(h.finish(ctxOf('application'), finishInput()), 'malformed_answer', /array that is not of strings/);
  });
  await withFixture(answer({ issuer: ISSUER, subject: 'alice', claims: { groups: ['admin\u202e'] } }), async (h) => {
    const { identity } = await h.finish(ctxOf('application'), finishInput());
    assert.match(
      checkProviderIdentity(h.policy, 'application', identity) ?? '',
      /the claim groups is an array whose items are not all printable/,
    );
  });
});

test('a provider that hangs fails the call with a timeout, and one that blocks its event loop is restarted', async () => {
  const log = captureLog();
  await withFixture(startFixture('hangs', { how: 'wait' }, { callTimeoutMs: 400, log }), async (h) => {
    const started = Date.now();
    await refused(h.finish(ctxOf(), finishInput()), 'timeout', /finish did not answer within 400 ms/);
    assert.ok(Date.now() - started < 2_000);
    // Still alive (it answers a ping): not restarted, and it keeps answering.
    assert.deepEqual(await h.health(), { status: 'ok' });
  });
  assert.ok(!log.lines.some((l) => l.includes('restarting')), log.lines.join('\n'));
  await withFixture(startFixture('hangs', { how: 'spin' }, { callTimeoutMs: 400, log }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'timeout', /finish did not answer within 400 ms/);
    // Its event loop is blocked: the liveness ping fails, the process is replaced, health answers again.
    await waitFor(async () => (await h.health().catch(() => null))?.status === 'ok', 10_000);
  });
  assert.ok(
    log.lines.some((l) => l.includes('does not answer at all')),
    log.lines.join('\n'),
  );
});

test('a provider that crashes mid-call fails the call clearly and is restarted with its configuration', async () => {
  const log = captureLog();
  await withFixture(startFixture('crashes', { ready: true }, { log }), async (h) => {
    await refused(h.finish(ctxOf(), finishInput()), 'crashed', /the provider process ended \(exit code 1\) while it was in flight/);
    await waitFor(async () => (await h.health().catch(() => null))?.status === 'ok', 10_000);
    // Twice: the restarted process crashes and restarts the same way.
    await refused(h.finish(ctxOf(), finishInput()), 'crashed', /while it was in flight/);
    await waitFor(async () => (await h.health().catch(() => null))?.status === 'ok', 10_000);
  });
  assert.ok(log.lines.filter((l) => l.includes('started')).length >= 3, log.lines.join('\n'));
});

test('a provider that floods an oversized answer or an endless line is cut off, and restarted', async () => {
  for (const how of ['answer', 'raw']) {
    // The cut-off must come from the size: a call bound far above the fixtures' 3 s, so that a
    // starved CI machine (seen once: an 8 MiB answer not read within 3 s) reports 'timeout'
    // only if the host really never noticed the size.
    await withFixture(startFixture('floods', { how }, { maxMessageBytes: 256 * 1024, callTimeoutMs: 20_000 }), async (h) => {
      await refused(h.begin(ctxOf()), 'oversized', /(message of (over )?\d+ bytes)/);
      await waitFor(async () => (await h.health().catch(() => null))?.status === 'ok', 10_000);
    });
  }
});

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`not within ${timeoutMs} ms`);
}
