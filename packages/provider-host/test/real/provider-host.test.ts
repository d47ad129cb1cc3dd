import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { PROVIDER_CONTRACT_VERSION } from '@svc/core';
import { confinedNodeArgs, ProviderError } from '@svc/provider-host';
import { ctxOf, finishInput, fixtureDir, ISSUER, startFixture } from '../support/fixtures.js';

/** The command lines of this process's children that run the provider host's child entry. */
function hostChildren(): string[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'args=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  } catch {
    return [];
  }
  return out.split('\n').filter((l) => l.includes('child.mjs'));
}

async function startRefused(promise: Promise<unknown>, pattern: RegExp): Promise<ProviderError> {
  let caught: unknown;
  await assert.rejects(promise, (err: unknown) => {
    caught = err;
    return err instanceof ProviderError && err.reason === 'start_refused' && err.code === 'provider_failed' && pattern.test(err.message);
  });
  return caught as ProviderError;
}

test('the child runs under the permission model: reads only in its package, no writes, processes, workers or addons', () => {
  const args = confinedNodeArgs(['/p/pkg', '/p/dep'], '/host/child.mjs', 128);
  assert.deepEqual(
    args.filter((a) => a.startsWith('--allow-')),
    ['--allow-fs-read=/p/pkg', '--allow-fs-read=/p/dep', '--allow-fs-read=/host/child.mjs'],
  );
  assert.ok(args.includes('--experimental-permission'));
  assert.ok(args.includes('--no-addons'));
  assert.ok(args.includes('--max-old-space-size=128'));
});

test('the running child’s command line is confined and holds no configuration value', async () => {
  const secret = 'client-secret-value-123456';
  const h = await startFixture('honest-provider', { 'test/issuer': ISSUER, 'test/secret': secret });
  try {
    const lines = hostChildren();
    assert.equal(lines.length, 1, lines.join('\n'));
    const line = lines[0] as string;
    assert.match(line, /--experimental-permission/);
    assert.match(line, new RegExp(`--allow-fs-read=${fixtureDir('honest-provider')}`));
    assert.doesNotMatch(line, /--allow-fs-write|--allow-child-process|--allow-worker|--allow-addons|--allow-wasi|--allow-fs-read=\*/);
    assert.ok(!line.includes(secret));
  } finally {
    await h.close();
  }
  assert.deepEqual(hostChildren(), [], 'close() ended the process');
});

test('the host answers every call of a well-behaved provider, each checked', async () => {
  const h = await startFixture('honest-provider', { 'test/issuer': ISSUER, 'test/redirect': true });
  try {
    assert.equal(h.kind, 'test');
    assert.equal(h.packageName, 'honest-provider');
    assert.equal(h.packageVersion, '1.0.0');
    assert.equal(h.signer, 'test-publisher');
    assert.ok(Object.isFrozen(h.policy) && Object.isFrozen(h.policy.realms));
    assert.deepEqual(await h.begin(ctxOf('application', 'link')), {
      state: { n: 1, realm: 'application' },
      reply: { kind: 'json', body: { challenge: 'abc' } },
    });
    const redirect = await h.begin(ctxOf('application', 'signin'));
    assert.equal(redirect.reply.kind, 'redirect');
    assert.equal(await h.credentialIdOf({ query: {}, body: { id: 'cred-1' } }), 'cred-1');
    assert.equal(await h.credentialIdOf({ query: {}, body: {} }), null);
    const done = await h.finish(ctxOf(), finishInput({ user: 'bob' }));
    assert.deepEqual(done, {
      identity: { issuer: ISSUER, subject: 'bob', claims: { email: 'bob@example.com', email_verified: true } },
      credential: null,
    });
    assert.deepEqual(await h.health(), { status: 'ok' });
  } finally {
    await h.close();
  }
});

test('a package whose export is not an AuthProvider of contract version 1 is refused at start', async () => {
  await startRefused(startFixture('not-a-provider', {}), /the export default is not an AuthProvider of contract version 1/);
  await startRefused(startFixture('honest-provider', {}, { exportName: 'missing' }), /the export missing is not an AuthProvider/);
  assert.deepEqual(hostChildren(), []);
});

test('a configuration the provider refuses stops the start, with every line it gave', async () => {
  const err = await startRefused(startFixture('honest-provider', { 'test/other': 1 }), /refused at start: :test\/issuer must be a string/);
  assert.deepEqual(err.problems, [':test/issuer must be a string']);
  assert.deepEqual(hostChildren(), []);
});

test('an entry outside the package directory, or a relative package directory, is refused before anything runs', async () => {
  await startRefused(
    startFixture('honest-provider', { 'test/issuer': ISSUER }, { entry: '../hangs/index.mjs' }),
    /not inside the package directory/,
  );
  await startRefused(
    startFixture('honest-provider', { 'test/issuer': ISSUER }, { packageDir: 'fixtures/honest-provider' }),
    /not an absolute path/,
  );
  await startRefused(
    startFixture('honest-provider', { 'test/issuer': ISSUER }, { exportName: 'default; process.exit()' }),
    /not an identifier/,
  );
  await startRefused(
    startFixture('honest-provider', { 'test/issuer': ISSUER }, { name: 'other' }),
    /its policy is named fixture, not other/,
  );
});

test('an error the provider throws fails the call as provider_error, and the provider keeps serving', async () => {
  const h = await startFixture('floods', {});
  try {
    await assert.rejects(
      h.finish(ctxOf(), finishInput()),
      (err: unknown) => err instanceof ProviderError && err.reason === 'provider_error' && /"not used"/.test(err.message),
    );
    assert.deepEqual(await h.health(), { status: 'ok' });
  } finally {
    await h.close();
  }
});

test('after close every call fails with closed, and close is idempotent', async () => {
  const h = await startFixture('honest-provider', { 'test/issuer': ISSUER });
  await h.close();
  await h.close();
  await assert.rejects(h.health(), (err: unknown) => err instanceof ProviderError && err.reason === 'closed');
  assert.deepEqual(hostChildren(), []);
});

test('the child entry speaks the contract version core declares, and imports nothing but Node built-ins', () => {
  const child = readFileSync(new URL('../../dist/child.mjs', import.meta.url), 'utf8');
  assert.match(child, new RegExp(`const CONTRACT_VERSION = ${PROVIDER_CONTRACT_VERSION};`));
  const imports = [...child.matchAll(/\bfrom\s+'([^']+)'|import\(\s*'([^']+)'/g)].map((m) => m[1] ?? m[2]);
  assert.ok(imports.length > 0);
  for (const spec of imports) assert.match(spec as string, /^node:/);
});

test('a package holding a symbolic link that leads outside it is not started (Node follows links past --allow-fs-read)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-provider-link-'));
  try {
    const pkg = join(dir, 'pkg');
    cpSync(fixtureDir('honest-provider'), pkg, { recursive: true });
    writeFileSync(join(dir, 'control.db'), 'secret');
    // A link that stays inside is fine.
    symlinkSync(join(pkg, 'index.mjs'), join(pkg, 'alias.mjs'));
    const inside = await startFixture('honest-provider', { 'test/issuer': ISSUER }, { packageDir: pkg });
    await inside.close();
    symlinkSync(join(dir, 'control.db'), join(pkg, 'leak'));
    await startRefused(
      startFixture('honest-provider', { 'test/issuer': ISSUER }, { packageDir: pkg }),
      /leak is a symbolic link that leads outside the package and its dependencies/,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
