import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { publicKeyHexOf } from '@svc/core';
import { ConfigError, type EdnValue, providerSettingsJson, trustedPublishersOf, validateProjectConfig } from '@svc/core/config';

// Provider modules in project.edn: the publishers the project trusts, and the module that
// activates :svc/auth-provider, whose :config splits into the service's policy and the
// provider's own settings (secrets only as references).

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const secret = (value: string) => ({ tag: 'svc/secret', value });
const KEY = publicKeyHexOf(generateKeyPairSync('ed25519').publicKey);
const OTHER = publicKeyHexOf(generateKeyPairSync('ed25519').publicKey);

function project(
  opts: { provider?: Record<string, EdnValue>; config?: Record<string, EdnValue>; extra?: Record<string, EdnValue> } = {},
): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/trusted-publishers': m({ svc: KEY }),
    ':svc/packages': m({
      'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }),
      '@svc/provider-oidc': m({ ':version': '0.1.0', ':sha256': 'b'.repeat(64) }),
    }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
      ':oidc': m({
        ':package': '@svc/provider-oidc',
        ':activate': [kw('svc/auth-provider')],
        ':config': m({
          ':oidc/issuer': 'https://login.example.com',
          ':oidc/client-id': 'svc',
          ':oidc/client-secret': secret('env:OIDC_SECRET'),
          ...opts.config,
        }),
        ...opts.provider,
      }),
    }),
    ...opts.extra,
  });
}

function problemsOf(value: EdnValue): string[] {
  try {
    validateProjectConfig(value, { file: 'p/project.edn' });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.problems.map((p) => `${p.file}: ${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

test('a provider module loads with its policy defaults and its own settings kept apart', () => {
  const cfg = validateProjectConfig(project(), { file: 'p/project.edn' });
  assert.deepEqual(cfg.trustedPublishers, { svc: KEY });
  assert.equal(cfg.providers.length, 1);
  const [oidc] = cfg.providers;
  assert.equal(oidc?.alias, 'oidc');
  assert.equal(oidc?.package, '@svc/provider-oidc');
  assert.deepEqual(oidc?.policy, {
    name: 'oidc',
    label: null,
    realms: ['application'],
    allowedIssuers: ['https://login.example.com'],
    jit: { enabled: false, emailDomains: [], groups: [], status: 'active' },
    groupsClaim: null,
    groupPrefix: null,
    linkByVerifiedEmail: false,
  });
  assert.deepEqual([...(oidc?.settings.keys() ?? [])], [':oidc/issuer', ':oidc/client-id', ':oidc/client-secret']);
  assert.ok(Object.isFrozen(oidc?.policy));
});

test('the policy keys are read and kept out of the settings the provider receives', () => {
  const cfg = validateProjectConfig(
    project({
      config: {
        ':provider/realms': ['application', 'management'],
        ':provider/allowed-issuers': ['https://a.example', 'https://b.example'],
        ':provider/jit-email-domains': ['Example.COM'],
      },
    }),
    { file: 'p/project.edn' },
  );
  const policy = cfg.providers[0]?.policy;
  assert.deepEqual(policy?.realms, ['application', 'management']);
  assert.deepEqual(policy?.allowedIssuers, ['https://a.example', 'https://b.example']);
  assert.deepEqual(policy?.jit, { enabled: false, emailDomains: ['example.com'], groups: [], status: 'active' });
  assert.ok(![...(cfg.providers[0]?.settings.keys() ?? [])].some((k) => k.startsWith(':provider/')));
});

test('a passkey provider defaults its allowed issuer to webauthn:<rp id>', () => {
  const cfg = validateProjectConfig(project({ provider: { ':config': m({ ':webauthn/rp-id': 'example.com' }) } }), {
    file: 'p/project.edn',
  });
  assert.deepEqual(cfg.providers[0]?.policy.allowedIssuers, ['webauthn:example.com']);
});

test('just-in-time provisioning into the management realm is refused', () => {
  assert.deepEqual(problemsOf(project({ config: { ':provider/jit': true, ':provider/realms': ['management'] } })), [
    'p/project.edn: :svc/modules :oidc :config :provider/jit: just-in-time provisioning is for the application realm only: a management-realm link always needs an existing management principal; remove "management" from :provider/realms or turn :provider/jit off',
  ]);
});

test('the user keys are read: JIT groups and status, the groups claim and its prefix, linking by verified email', () => {
  const jit = validateProjectConfig(
    project({ config: { ':provider/jit': true, ':provider/jit-groups': ['staff', 'all'], ':provider/jit-status': kw('disabled') } }),
    { file: 'p/project.edn' },
  ).providers[0]?.policy;
  assert.deepEqual(jit?.jit, { enabled: true, emailDomains: [], groups: ['all', 'staff'], status: 'disabled' });
  const claims = validateProjectConfig(
    project({
      config: { ':provider/groups-claim': 'groups', ':provider/group-prefix': 'app-', ':provider/link-by-verified-email': true },
    }),
    { file: 'p/project.edn' },
  ).providers[0]?.policy;
  assert.equal(claims?.groupsClaim, 'groups');
  assert.equal(claims?.groupPrefix, 'app-');
  assert.equal(claims?.linkByVerifiedEmail, true);
});

test('the user keys refuse what cannot work: JIT keys without JIT, a prefix without a claim, groups from two places, email linking into management', () => {
  const keys = (config: Record<string, EdnValue>) => problemsOf(project({ config })).map((p) => p.split(': ')[1]);
  assert.deepEqual(keys({ ':provider/jit-groups': ['staff'], ':provider/jit-status': kw('disabled') }).sort(), [
    ':svc/modules :oidc :config :provider/jit-groups',
    ':svc/modules :oidc :config :provider/jit-status',
  ]);
  assert.deepEqual(keys({ ':provider/group-prefix': 'app-' }), [':svc/modules :oidc :config :provider/group-prefix']);
  assert.deepEqual(keys({ ':provider/jit': true, ':provider/jit-groups': ['staff'], ':provider/groups-claim': 'groups' }), [
    ':svc/modules :oidc :config :provider/jit-groups',
  ]);
  assert.deepEqual(keys({ ':provider/realms': ['application', 'management'], ':provider/link-by-verified-email': true }), [
    ':svc/modules :oidc :config :provider/link-by-verified-email',
  ]);
  assert.deepEqual(
    keys({
      ':provider/jit': true,
      ':provider/jit-groups': ['Not A Group'],
      ':provider/jit-status': 'disabled',
      ':provider/groups-claim': 'Groups!',
      ':provider/link-by-verified-email': 'yes',
    }).sort(),
    [
      ':svc/modules :oidc :config :provider/groups-claim',
      ':svc/modules :oidc :config :provider/jit-groups',
      ':svc/modules :oidc :config :provider/jit-status',
      ':svc/modules :oidc :config :provider/link-by-verified-email',
    ],
  );
});

test('a literal client secret in a provider module is refused: secrets are references', () => {
  const problems = problemsOf(project({ config: { ':oidc/client-secret': 'hunter2' } }));
  assert.equal(problems.length, 1);
  assert.match(
    problems[0] ?? '',
    /^p\/project\.edn: :svc\/modules :oidc :config :oidc\/client-secret: secrets are never written in project\.edn/,
  );
  assert.ok(!problems.join('\n').includes('hunter2'), 'the secret is not echoed');
});

test('bad policy values are refused naming the key', () => {
  const problems = problemsOf(
    project({
      config: {
        ':provider/realms': ['admin'],
        ':provider/jit': 'yes',
        ':provider/allowed-issuers': 'https://a.example',
        ':provider/jit-email-domains': ['not a domain'],
        ':provider/bogus': 1,
      },
    }),
  ).map((p) => p.split(': ')[1]);
  assert.deepEqual(problems.sort(), [
    ':svc/modules :oidc :config :provider/allowed-issuers',
    ':svc/modules :oidc :config :provider/bogus',
    ':svc/modules :oidc :config :provider/jit',
    ':svc/modules :oidc :config :provider/jit-email-domains',
    ':svc/modules :oidc :config :provider/realms',
  ]);
});

test('a bad publisher key is refused naming the file and the key', () => {
  const short = problemsOf(project({ extra: { ':svc/trusted-publishers': m({ svc: 'abc' }) } }));
  assert.match(
    short[0] ?? '',
    /^p\/project\.edn: :svc\/trusted-publishers "svc": expected the publisher's Ed25519 public key as 64 hex digits, found string "abc"/,
  );
  const small = '0'.repeat(64);
  assert.match(
    problemsOf(project({ extra: { ':svc/trusted-publishers': m({ svc: small }) } }))[0] ?? '',
    /:svc\/trusted-publishers "svc": .*small-order/,
  );
});

test('a provider module without any trusted publisher, from the store package, beside :svc/app, or under a bad alias is refused', () => {
  const noTrust = problemsOf(project({ extra: { ':svc/trusted-publishers': m({}) } }));
  assert.match(
    noTrust[0] ?? '',
    /:svc\/modules :oidc :activate: package "@svc\/provider-oidc" may not activate the privileged export :svc\/auth-provider: provider packages must be signed/,
  );
  const fromStore = problemsOf(project({ provider: { ':package': 'svc-store-sqlite' } }));
  assert.match(fromStore.join('\n'), /:svc\/modules :oidc :package: package "svc-store-sqlite" holds the control store/);
  const withApp = problemsOf(project({ provider: { ':activate': [kw('svc/auth-provider'), kw('svc/app')] } }));
  assert.match(withApp.join('\n'), /may not activate the privileged export :svc\/auth-provider: /);
  const unpinned = problemsOf(
    project({
      extra: {
        ':svc/packages': m({
          'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }),
          '@svc/provider-oidc': m({ ':version': '0.1.0' }),
        }),
      },
    }),
  );
  assert.match(unpinned.join('\n'), /has no :sha256 in :svc\/packages; a provider module runs only from an archive pinned by its SHA-256/);
});

test('a profile may add a trusted publisher, and install reads the chosen profile', () => {
  const cfg = project({ extra: { ':svc/profiles': m({ ':prod': m({ ':svc/trusted-publishers': m({ ops: OTHER }) }) }) } });
  assert.deepEqual(trustedPublishersOf(cfg, { file: 'p/project.edn' }), { svc: KEY });
  assert.deepEqual(trustedPublishersOf(cfg, { file: 'p/project.edn', profile: 'prod' }), { svc: KEY, ops: OTHER });
  assert.deepEqual(validateProjectConfig(cfg, { file: 'p/project.edn', profile: 'prod' }).trustedPublishers, { svc: KEY, ops: OTHER });
});

test("a provider's settings become the JSON it receives: keyword keys without the colon, secrets resolved", () => {
  const cfg = validateProjectConfig(project({ config: { ':oidc/scopes': ['openid', 'email'], ':oidc/mode': kw('strict') } }), {
    file: 'p/project.edn',
  });
  const seen: string[] = [];
  const json = providerSettingsJson(cfg.providers[0]?.settings ?? new Map(), (ref) => {
    seen.push(`${ref.source}:${ref.name}`);
    return 's3cret';
  });
  assert.deepEqual(json, {
    'oidc/issuer': 'https://login.example.com',
    'oidc/client-id': 'svc',
    'oidc/client-secret': 's3cret',
    'oidc/scopes': ['openid', 'email'],
    'oidc/mode': 'strict',
  });
  assert.deepEqual(seen, ['env:OIDC_SECRET']);
});
