import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, DEFAULT_AUTH_SETTINGS, type EdnValue, validateProjectConfig } from '@svc/core/config';

// A tiny builder for parsed EDN: keys starting with ':' are keywords, `kw('x')` a keyword value.
const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const secret = (value: string) => ({ tag: 'svc/secret', value });

function baseConfig(authConfig: Record<string, EdnValue> = {}, extra: Record<string, EdnValue> = {}): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store'), ...authConfig }) }),
    }),
    ...extra,
  });
}

function problemsOf(value: EdnValue, profile?: string): string[] {
  try {
    validateProjectConfig(value, { file: 'p/project.edn', profile: profile ?? null });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.problems.map((p) => `${p.file}: ${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

test("the contract's project.edn loads with every default filled in", () => {
  const cfg = validateProjectConfig(baseConfig({ ':auth/access-token-ttl-seconds': 600 }), { file: 'p/project.edn' });
  assert.equal(cfg.project, 'demo');
  assert.equal(cfg.store.alias, 'store');
  assert.equal(cfg.store.package, 'svc-store-sqlite');
  assert.equal(cfg.auth.accessTokenTtlSeconds, 600);
  assert.equal(cfg.auth.refreshReuseGraceSeconds, DEFAULT_AUTH_SETTINGS.refreshReuseGraceSeconds);
});

test('the loaded configuration is deeply immutable', () => {
  const cfg = validateProjectConfig(baseConfig(), { file: 'p/project.edn' });
  assert.ok(Object.isFrozen(cfg) && Object.isFrozen(cfg.auth) && Object.isFrozen(cfg.store));
  assert.throws(() => (cfg.store.config as Map<string, EdnValue>).set(':x', 1), TypeError);
});

test('every problem is reported at once, each with the file and the key', () => {
  const problems = problemsOf(baseConfig({ ':auth/challenge-ttl-seconds': 'sixty', ':auth/bogus': 1 }, { ':svc/unknown': true }));
  assert.equal(problems.length, 3);
  assert.ok(problems.every((p) => p.startsWith('p/project.edn: ')));
  assert.ok(problems.some((p) => p.includes(':auth/challenge-ttl-seconds')));
  assert.ok(problems.some((p) => p.includes(':auth/bogus')));
  assert.ok(problems.some((p) => p.includes(':svc/unknown')));
});

test('a dangling :auth/store alias is refused', () => {
  const problems = problemsOf(baseConfig({ ':auth/store': kw('db') }));
  assert.ok(problems.some((p) => p.includes(':auth/store') && p.includes('dangling')));
});

test('a store module that does not activate :svc/store is refused', () => {
  const cfg = baseConfig();
  const mods = (cfg as Map<string, EdnValue>).get(':svc/modules') as Map<string, EdnValue>;
  mods.set(':store', m({ ':package': 'svc-store-sqlite', ':activate': [] }));
  assert.ok(problemsOf(cfg).some((p) => p.includes(':svc/store')));
});

test('a module from an unpinned package is refused', () => {
  const cfg = baseConfig();
  (cfg as Map<string, EdnValue>).set(':svc/packages', m({}));
  assert.ok(problemsOf(cfg).some((p) => p.includes('not pinned')));
});

test('lifetimes outside their bounds are refused (no day-long access tokens)', () => {
  assert.equal(problemsOf(baseConfig({ ':auth/access-token-ttl-seconds': 86_401 })).length, 1);
  assert.equal(problemsOf(baseConfig({ ':auth/refresh-reuse-grace-seconds': -1 })).length, 1);
});

test('no profile can weaken the management realm', () => {
  const cfg = baseConfig({}, { ':svc/profiles': m({ ':dev': m({ ':auth/dev-mode': true }) }) });
  assert.ok(problemsOf(cfg, 'dev').some((p) => p.includes('management realm')));
  const direct = baseConfig({ ':auth/disable-auth': true });
  assert.ok(problemsOf(direct).some((p) => p.includes('management realm')));
});

test('a profile overrides the base configuration key by key', () => {
  const cfg = baseConfig({}, { ':svc/profiles': m({ ':prod': m({ ':svc/control-dir': '/var/lib/svc' }) }) });
  assert.equal(validateProjectConfig(cfg, { file: 'f', profile: 'prod' }).controlDir, '/var/lib/svc');
  assert.equal(validateProjectConfig(cfg, { file: 'f' }).controlDir, null);
  assert.ok(problemsOf(cfg, 'staging').some((p) => p.includes(':staging')));
});

test('a literal secret in a module config is not a secret reference', async () => {
  const { parseSecretRef } = await import('@svc/core/config');
  const problems: { file: string; key: string; message: string }[] = [];
  assert.equal(parseSecretRef('hunter2', problems, 'f', ':password'), null);
  assert.deepEqual(parseSecretRef(secret('env:PGPASSWORD'), problems, 'f', ':password'), { source: 'env', name: 'PGPASSWORD' });
  assert.deepEqual(parseSecretRef(secret('file:/run/secrets/pg'), problems, 'f', ':password'), { source: 'file', name: '/run/secrets/pg' });
  assert.equal(problems.length, 1);
});

test('retention is 30 days by default, set in days, and refused outside 1 to 3650', () => {
  assert.equal(validateProjectConfig(baseConfig(), { file: 'p/project.edn' }).auth.retentionDays, 30);
  assert.equal(validateProjectConfig(baseConfig({ ':auth/retention-days': 7 }), { file: 'p/project.edn' }).auth.retentionDays, 7);
  const [problem] = problemsOf(baseConfig({ ':auth/retention-days': 0 }));
  assert.match(problem ?? '', /:auth\/retention-days: expected a whole number of days from 1 to 3650/);
});

test(':svc/metrics-listen is read as a string, per profile, off when unset, and anything else is refused at load', () => {
  assert.equal(validateProjectConfig(baseConfig(), { file: 'p/project.edn' }).metricsListen, null);
  const exposed = baseConfig(
    {},
    { ':svc/metrics-listen': '127.0.0.1:9464', ':svc/profiles': m({ ':k8s': m({ ':svc/metrics-listen': '0.0.0.0:9464' }) }) },
  );
  assert.equal(validateProjectConfig(exposed, { file: 'p/project.edn' }).metricsListen, '127.0.0.1:9464');
  assert.equal(validateProjectConfig(exposed, { file: 'p/project.edn', profile: 'k8s' }).metricsListen, '0.0.0.0:9464');
  assert.deepEqual(problemsOf(baseConfig({}, { ':svc/metrics-listen': 9464 })), [
    'p/project.edn: :svc/metrics-listen: expected "host:port", found number 9464',
  ]);
});
