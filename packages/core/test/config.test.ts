import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, type EdnValue, validateProjectConfig } from '@svc/core/config';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';

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

// A module added beside the store and auth modules of baseConfig.
function withModule(alias: string, module: Record<string, EdnValue>, pins: Record<string, EdnValue> = {}): EdnValue {
  const cfg = baseConfig() as Map<string, EdnValue>;
  (cfg.get(':svc/modules') as Map<string, EdnValue>).set(alias, m(module));
  for (const [name, pin] of Object.entries(pins)) (cfg.get(':svc/packages') as Map<string, EdnValue>).set(name, pin);
  return cfg;
}
const acmePin = { 'acme-idp': m({ ':version': '1.0.0' }) };

test('a module activating :svc/auth-provider while project.edn trusts no publisher is refused: provider packages must be signed', () => {
  const pin = { 'acme-idp': m({ ':version': '1.0.0', ':sha256': 'b'.repeat(64) }) };
  const problems = problemsOf(withModule(':idp', { ':package': 'acme-idp', ':activate': [kw('svc/auth-provider')] }, pin));
  assert.equal(problems.length, 1);
  assert.match(
    problems[0] ?? '',
    /^p\/project\.edn: :svc\/modules :idp :activate: package "acme-idp" may not activate the privileged export :svc\/auth-provider: provider packages must be signed by a publisher project\.edn trusts/,
  );
});

test('a capability outside the contract, or one this build cannot serve, is refused where it is activated', () => {
  const unknown = problemsOf(withModule(':x', { ':package': 'svc-store-sqlite', ':activate': [kw('svc/bogus')] }));
  assert.deepEqual(unknown, [
    'p/project.edn: :svc/modules :x :activate: unknown capability :svc/bogus; expected one of :svc/store, :svc/app, :svc/auth-provider',
  ]);
});

test('the built-in :svc/auth module activates nothing, and no other built-in module exists', () => {
  const cfg = baseConfig() as Map<string, EdnValue>;
  const auth = (cfg.get(':svc/modules') as Map<string, EdnValue>).get(':auth') as Map<string, EdnValue>;
  auth.set(':activate', [kw('svc/store')]);
  assert.ok(problemsOf(cfg).some((p) => p.includes(':svc/modules :auth :activate') && p.includes('activates nothing')));
  const other = problemsOf(withModule(':extra', { ':module': kw('svc/other') }));
  assert.ok(other.some((p) => p.includes(':svc/modules :extra :module') && p.includes('not a built-in module')));
});

test('a literal secret in a module whose schema svc does not know is refused; a secret reference loads', () => {
  const literal = problemsOf(withModule(':idp', { ':package': 'acme-idp', ':config': m({ ':idp/client-secret': 'hunter2' }) }, acmePin));
  assert.equal(literal.length, 1);
  assert.match(literal[0] ?? '', /:svc\/modules :idp :config :idp\/client-secret: secrets are never written in project\.edn/);
  const nested = problemsOf(
    withModule(':idp', { ':package': 'acme-idp', ':config': m({ ':idp/clients': [m({ ':api-key': 'k' })] }) }, acmePin),
  );
  assert.ok(nested.some((p) => p.includes(':idp/clients [0] :api-key')));
  const ref = withModule(
    ':idp',
    {
      ':package': 'acme-idp',
      ':config': m({
        ':idp/client-secret': secret('env:IDP_SECRET'),
        ':idp/token-ttl': 60,
        ':idp/token-endpoint': 'https://idp.example/token',
      }),
    },
    acmePin,
  );
  assert.equal(validateProjectConfig(ref, { file: 'p/project.edn' }).modules.idp?.config.get(':idp/token-ttl'), 60);
});

test('a malformed secret reference or an unknown tag in any module config is refused', () => {
  const problems = problemsOf(
    withModule(
      ':idp',
      { ':package': 'acme-idp', ':config': m({ ':a': secret('hunter2'), ':b': { tag: 'acme/raw', value: 'x' } }) },
      acmePin,
    ),
  );
  assert.equal(problems.length, 2);
  assert.ok(problems.some((p) => p.includes(':config :a: expected #svc/secret')));
  assert.ok(problems.some((p) => p.includes(':config :b: unknown tag #acme/raw')));
});

test("a known package version's module :config is checked at load against its field table", () => {
  const fields = { ':store/synchronous': { kind: 'string', oneOf: ['normal', 'full'] } } as const;
  const cfg = baseConfig() as Map<string, EdnValue>;
  const store = (cfg.get(':svc/modules') as Map<string, EdnValue>).get(':store') as Map<string, EdnValue>;
  store.set(':config', m({ ':store/synchronous': 'fast', ':store/colour': 'blue' }));
  const check = (moduleConfigs: Record<string, typeof fields>) => {
    try {
      validateProjectConfig(cfg, { file: 'p/project.edn', moduleConfigs });
      return [];
    } catch (e) {
      assert.ok(e instanceof ConfigError);
      return e.problems.map((p) => p.key);
    }
  };
  assert.deepEqual(check({ 'svc-store-sqlite@0.1.0': fields }).sort(), [
    ':svc/modules :store :config :store/colour',
    ':svc/modules :store :config :store/synchronous',
  ]);
  // Another version's table may differ: its addon checks the module when it opens.
  assert.deepEqual(check({ 'svc-store-sqlite@9.9.9': fields }), []);
});

test('an unselected profile with a bad value is refused at load', () => {
  const cfg = baseConfig({}, { ':svc/profiles': m({ ':prod': m({ ':svc/node-listen': 9091 }), ':dev': m({}) }) });
  const expected = ['p/project.edn: :svc/profiles :prod :svc/node-listen: expected "host:port", found number 9091'];
  assert.deepEqual(problemsOf(cfg), expected);
  assert.deepEqual(problemsOf(cfg, 'dev'), expected);
  assert.deepEqual(problemsOf(cfg, 'prod'), ['p/project.edn: :svc/node-listen: expected "host:port", found number 9091']);
});

test("an unselected profile's module is checked like the base's: capabilities, auth settings, dangling aliases", () => {
  const prod = m({
    ':svc/modules': m({
      ':idp': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/auth-provider')] }),
      ':auth': m({ ':config': m({ ':auth/access-token-ttl-seconds': 86_401, ':auth/store': kw('db') }) }),
    }),
  });
  const keys = problemsOf(baseConfig({}, { ':svc/profiles': m({ ':prod': prod }) })).map((p) => p.split(': ')[1]);
  assert.deepEqual(keys.sort(), [
    ':svc/profiles :prod :svc/modules :auth :config :auth/access-token-ttl-seconds',
    ':svc/profiles :prod :svc/modules :auth :config :auth/store',
    ':svc/profiles :prod :svc/modules :idp :activate',
  ]);
});

test('a problem the base and its profiles share is reported once, beside every problem only a profile has', () => {
  const cfg = baseConfig(
    { ':auth/challenge-ttl-seconds': 5 },
    { ':svc/profiles': m({ ':a': m({ ':svc/control-dir': 1 }), ':b': m({ ':svc/metrics-listen': true }) }) },
  );
  const problems = problemsOf(cfg);
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.equal(problems.filter((p) => p.includes(':auth/challenge-ttl-seconds')).length, 1);
  assert.ok(problems.some((p) => p.includes(':svc/profiles :a :svc/control-dir')));
  assert.ok(problems.some((p) => p.includes(':svc/profiles :b :svc/metrics-listen')));
});

test('a chosen profile that completes the base still loads (the base alone is only checked when no profile is chosen)', () => {
  const cfg = baseConfig({}, { ':svc/profiles': m({ ':prod': m({ ':svc/control-dir': '/var/lib/svc' }) }) }) as Map<string, EdnValue>;
  cfg.set(':svc/control-dir', 7);
  assert.equal(validateProjectConfig(cfg, { file: 'f', profile: 'prod' }).controlDir, '/var/lib/svc');
  assert.deepEqual(problemsOf(cfg), ['p/project.edn: :svc/control-dir: expected a directory path string, found number 7']);
});
