import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { ProviderHandle, ProviderPolicy } from '@svc/core';
import { startProviderHost } from '@svc/provider-host';
import { buildNodeApp, createNodeIdentity, ed25519KeyProvider } from '../../src/index.js';
import { NODE_ROUTES } from '../../src/node/routes.js';
import { within } from '../support/bounded.js';
import { startHarness } from '../support/harness.js';
import { adminToken, type NodeHarness, nodeApi, startNodeHarness, TEST_COMPONENTS } from '../support/node-harness.js';

// Item 7 of #13: installed provider packages, each a real confined child process
// (@svc/provider-host), appear in status and health, and in discovery as data only.

const PACKAGE_DIR = new URL('../fixtures/provider-package', import.meta.url).pathname;

function policy(name: string): ProviderPolicy {
  return { name, realms: ['application'], allowedIssuers: ['webauthn:app.example.com'], jit: { enabled: false, emailDomains: [] } };
}

function start(name: string, health: 'ok' | 'down' | 'hang' | 'crash'): Promise<ProviderHandle> {
  return startProviderHost({
    name,
    packageDir: PACKAGE_DIR,
    entry: 'index.mjs',
    exportName: 'provider',
    dependencyDirs: [],
    config: { 'test/health': health },
    policy: policy(name),
    packageName: 'svc-provider-fixture',
    packageVersion: '2.3.4',
    signer: 'svc',
    callTimeoutMs: 5_000,
    restartDelayMs: 50,
  });
}

describe('node surface: provider packages', () => {
  let handles: ProviderHandle[] = [];
  let h: NodeHarness;
  before(async () => {
    handles = await Promise.all([start('passkeys', 'ok'), start('down', 'down'), start('stuck', 'hang'), start('crashing', 'crash')]);
    h = await startNodeHarness({ providerPackages: handles });
  });
  after(async () => {
    await h.close();
    await Promise.all(handles.map((p) => p.close()));
  });

  test('status lists each provider package: module name, kind, package, version, signer, verification and realms', async () => {
    const r = await nodeApi(h, 'GET', '/edge/0-alpha/status', { token: await adminToken(h) });
    assert.equal(r.status, 200);
    const entry = (name: string) => ({
      name,
      kind: 'webauthn',
      builtin: false,
      version: '2.3.4',
      package: 'svc-provider-fixture',
      signer: 'svc',
      verification: 'verified',
      realms: ['application'],
    });
    assert.deepEqual(r.body.providers, [
      { name: 'ed25519', kind: 'device-key', builtin: true, version: null },
      entry('passkeys'),
      entry('down'),
      entry('stuck'),
      entry('crashing'),
    ]);
    assert.doesNotMatch(r.text, /test\/health/, 'no configuration in status');
  });

  test('health runs each provider’s own check: a down, stuck or crashing provider makes health 503 degraded naming it, not a 500', async () => {
    // The stuck provider never answers its check: an answer at all proves the health timeout
    // bounds it (no clock in the test; the wait's bound only keeps a regression from hanging).
    const r = await within(
      nodeApi(h, 'GET', '/edge/0-alpha/health'),
      20_000,
      'health with a stuck provider (bounded by the 1 s health-check timeout)',
    );
    assert.equal(r.status, 503);
    assert.equal(r.body.status, 'degraded');
    assert.deepEqual(r.body.store, { status: 'ok' });
    assert.deepEqual(r.body.providers, [
      { name: 'ed25519', kind: 'device-key', status: 'ok' },
      { name: 'passkeys', kind: 'webauthn', status: 'ok' },
      { name: 'down', kind: 'webauthn', status: 'failed' },
      { name: 'stuck', kind: 'webauthn', status: 'failed' },
      { name: 'crashing', kind: 'webauthn', status: 'failed' },
    ]);
    assert.doesNotMatch(r.text, /metadata service/, "the provider's detail goes to the log only");
  });

  test('discovery names the providers as data and advertises no route beyond the contract', async () => {
    const r = await nodeApi(h, 'GET', '/.well-known/edge');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.providers, [
      { name: 'ed25519', kind: 'device-key' },
      { name: 'passkeys', kind: 'webauthn' },
      { name: 'down', kind: 'webauthn' },
      { name: 'stuck', kind: 'webauthn' },
      { name: 'crashing', kind: 'webauthn' },
    ]);
    assert.deepEqual(r.body.routes, NODE_ROUTES);
    assert.equal(r.body.routes.length, 6);
    for (const path of [
      '/.svc/auth/v1/providers/passkeys/begin',
      '/edge/0-alpha/providers/passkeys',
      '/edge/0-alpha/providers/passkeys/health',
    ]) {
      const probe = await nodeApi(h, 'POST', path, { body: {} });
      assert.equal(probe.status, 404, path);
    }
  });
});

describe('node surface: only healthy provider packages', () => {
  test('health is 200 ok when every provider package reports ok', async () => {
    const handle = await start('passkeys', 'ok');
    const h = await startNodeHarness({ providerPackages: [handle] });
    try {
      const r = await nodeApi(h, 'GET', '/edge/0-alpha/health');
      assert.equal(r.status, 200);
      assert.equal(r.body.status, 'ok');
    } finally {
      await h.close();
      await handle.close();
    }
  });

  test('two providers with one name are refused when the surface is built', async () => {
    const handle = await start('ed25519', 'ok');
    const base = await startHarness();
    try {
      const identity = createNodeIdentity(generateKeyPairSync('ed25519').privateKey);
      await assert.rejects(
        buildNodeApp({
          deps: base.deps,
          identity,
          components: () => TEST_COMPONENTS,
          providers: [ed25519KeyProvider],
          providerPackages: [handle],
        }),
        /two providers are named ed25519/,
      );
    } finally {
      await base.close();
      await handle.close();
    }
  });
});
