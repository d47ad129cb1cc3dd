import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { describe, test } from 'node:test';

import { ConfigError, type EdnValue, validateProjectConfig } from '@svc/core/config';
import { PROJECT_KEYS } from '@svc/core/settings';
import { DEFAULT_APP_GATEWAY_CONFIG } from '../src/app-config.js';
import { appListenProblem, appPathPatternProblem } from '../src/app-config-reader.js';
import { cidrPrefixLength, ipVersion, isIpOrCidr } from '../src/ip-address.js';

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const SUB = 'sub_01JD0000000000000000000000';

function project(extra: Record<string, EdnValue> = {}): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
    }),
    ...extra,
  });
}

const load = (extra: Record<string, EdnValue>, profile: string | null = null) =>
  validateProjectConfig(project(extra), { file: 'p/project.edn', profile }).app;

function problemsOf(extra: Record<string, EdnValue>): string[] {
  try {
    validateProjectConfig(project(extra), { file: 'p/project.edn' });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    for (const p of e.problems) assert.equal(p.file, 'p/project.edn');
    return e.problems.map((p) => `${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

describe('the :svc/app-* keys of project.edn', () => {
  test('without any of them the gateway configuration is the default one, and every key is in the one table', () => {
    assert.deepEqual(load({}), DEFAULT_APP_GATEWAY_CONFIG);
    for (const key of [
      ':svc/app-listen',
      ':svc/app-upstream',
      ':svc/app-audience',
      ':svc/app-public-origin',
      ':svc/app-public',
      ':svc/app-identity-headers',
      ':svc/app-require',
      ':svc/app-tls',
      ':svc/app-trusted-proxies',
    ]) {
      const spec = PROJECT_KEYS.find((k) => k.key === key);
      assert.ok(spec?.inProfile && spec.meaning.length > 20, `${key} is in PROJECT_KEYS with a meaning`);
    }
  });

  test('every key read together, as the gateway gets it', () => {
    const app = load({
      ':svc/app-listen': '0.0.0.0:8443',
      ':svc/app-upstream': 'http://127.0.0.1:3000/',
      ':svc/app-audience': 'https://app.example',
      ':svc/app-public-origin': 'HTTPS://App.Example:443/',
      ':svc/app-auth-origin': 'HTTPS://App.Example/',
      ':svc/app-public': ['/healthz', '/public/*', '/healthz'],
      ':svc/app-identity-headers': ['X-Tenant-User', 'x_team'],
      ':svc/app-require': m({
        '/admin/*': m({ ':subjects': [SUB], ':amr': ['ed25519'], ':max-auth-age-seconds': 3600 }),
        '/billing': m({ ':max-auth-age-seconds': 600 }),
        '/ops/*': m({ ':groups': ['ops', 'admins', 'ops'], ':email-domains': ['Example.COM', 'Bücher.example'] }),
      }),
      ':svc/app-tls': m({ ':cert': 'tls/cert.pem', ':key': 'tls/key.pem' }),
      ':svc/app-trusted-proxies': ['10.0.0.0/8', '::1', '192.0.2.7'],
    });
    assert.deepEqual(app, {
      listen: '0.0.0.0:8443',
      upstream: 'http://127.0.0.1:3000',
      audience: 'https://app.example',
      publicOrigin: 'https://app.example',
      authOrigin: 'https://app.example',
      publicPaths: ['/healthz', '/public/*'],
      identityHeaders: ['x-tenant-user', 'x-team'],
      requirements: [
        { path: '/admin/*', subjects: [SUB], groups: null, emailDomains: null, amr: ['ed25519'], maxAuthAgeSeconds: 3600 },
        { path: '/billing', subjects: null, groups: null, emailDomains: null, amr: null, maxAuthAgeSeconds: 600 },
        {
          path: '/ops/*',
          subjects: null,
          groups: ['ops', 'admins'],
          emailDomains: ['example.com', 'xn--bcher-kva.example'],
          amr: null,
          maxAuthAgeSeconds: null,
        },
      ],
      tls: { cert: 'tls/cert.pem', key: 'tls/key.pem' },
      trustedProxies: ['10.0.0.0/8', '::1', '192.0.2.7'],
      brand: null,
    });
    assert.ok(Object.isFrozen(app) && Object.isFrozen(app.publicPaths) && Object.isFrozen(app.requirements[0]));
  });

  test(':svc/app-listen takes "host:port" or "off" (any case), nothing else', () => {
    assert.equal(load({ ':svc/app-listen': '127.0.0.1:0' }).listen, '127.0.0.1:0');
    assert.equal(load({ ':svc/app-listen': '[::]:8080' }).listen, '[::]:8080');
    assert.equal(load({ ':svc/app-listen': 'app.internal:8080' }).listen, 'app.internal:8080');
    assert.equal(load({ ':svc/app-listen': 'OFF' }).listen, 'off');
    for (const bad of ['8080', '127.0.0.1', '127.0.0.1:70000', '::1:8080', '[nope]:80', ':8080', '']) {
      const [p] = problemsOf({ ':svc/app-listen': bad });
      assert.match(p ?? '', /^:svc\/app-listen: expected "host:port" or "off"/, bad);
    }
    assert.match(problemsOf({ ':svc/app-listen': 8080 })[0] ?? '', /found number 8080/);
  });

  test(':svc/app-upstream is an http(s) origin: no credentials, query, fragment or path', () => {
    assert.equal(load({ ':svc/app-upstream': 'https://app.internal:8443' }).upstream, 'https://app.internal:8443');
    assert.equal(load({ ':svc/app-upstream': 'http://[::1]:3000/' }).upstream, 'http://[::1]:3000');
    const cases: [string, RegExp][] = [
      ['ftp://127.0.0.1:3000', /neither http: nor https:/],
      ['http://user:pw@127.0.0.1:3000', /credentials never go in the URL/],
      ['http://127.0.0.1:3000/?a=1', /no query or fragment/],
      ['http://127.0.0.1:3000/#x', /no query or fragment/],
      ['http://127.0.0.1:3000/app', /the origin only/],
      ['127.0.0.1:3000', /neither http: nor https:|not a URL/],
      ['not a url', /not a URL/],
    ];
    for (const [value, why] of cases) {
      const [p] = problemsOf({ ':svc/app-upstream': value });
      assert.match(p ?? '', /^:svc\/app-upstream: expected an http:\/\/ or https:\/\/ origin/, value);
      assert.match(p ?? '', why, value);
    }
    assert.equal(problemsOf({ ':svc/app-upstream': kw('x') }).length, 1);
  });

  test(':svc/app-audience is a non-empty string', () => {
    assert.equal(load({ ':svc/app-audience': 'my-app' }).audience, 'my-app');
    for (const bad of ['', '  ', 'a\nb', 7] as EdnValue[]) {
      assert.match(problemsOf({ ':svc/app-audience': bad })[0] ?? '', /^:svc\/app-audience: expected a non-empty string/);
    }
  });

  test(':svc/app-public-origin is an http(s) origin in one spelling: no path, query, user or other scheme', () => {
    assert.equal(load({ ':svc/app-public-origin': 'https://app.example.com' }).publicOrigin, 'https://app.example.com');
    assert.equal(load({ ':svc/app-public-origin': 'http://LOCALHOST:8080/' }).publicOrigin, 'http://localhost:8080');
    assert.equal(load({ ':svc/app-public-origin': 'https://[::1]:8443' }).publicOrigin, 'https://[::1]:8443');
    for (const bad of [
      'app.example.com',
      'https://app.example.com/app',
      'https://user@app.example.com',
      'https://app.example.com?x=1',
      'ftp://app.example.com',
      'null',
      'https://app.example.com:99999',
      '',
      8443,
    ] as EdnValue[]) {
      assert.match(
        problemsOf({ ':svc/app-public-origin': bad })[0] ?? '',
        /^:svc\/app-public-origin: expected an http:\/\/ or https:\/\/ origin/,
        String(bad),
      );
    }
  });

  test(':svc/app-auth-origin is an http(s) origin in one spelling, like :svc/app-public-origin; absent, each host signs in on its own', () => {
    assert.equal(load({}).authOrigin, null);
    assert.equal(load({ ':svc/app-auth-origin': 'https://Auth.Example.com:443' }).authOrigin, 'https://auth.example.com');
    for (const bad of [
      'auth.example.com',
      'https://auth.example.com/login',
      'https://u@auth.example.com',
      'javascript:alert(1)',
      8443,
    ] as EdnValue[]) {
      assert.match(
        problemsOf({ ':svc/app-auth-origin': bad })[0] ?? '',
        /^:svc\/app-auth-origin: expected an http:\/\/ or https:\/\/ origin/,
        String(bad),
      );
    }
    // One public origin is every request's: an auth origin elsewhere could never be reached.
    assert.match(
      problemsOf({ ':svc/app-auth-origin': 'https://auth.example.com', ':svc/app-public-origin': 'https://app.example.com' })[0] ?? '',
      /^:svc\/app-auth-origin: expected the :svc\/app-public-origin https:\/\/app\.example\.com/,
    );
  });

  test(':svc/app-public holds exact paths and /* prefixes, never anything under /.svc/', () => {
    assert.deepEqual(load({ ':svc/app-public': ['/', '/*', '/a/', '/a/b.txt', '/static/*'] }).publicPaths, [
      '/',
      '/*',
      '/a/',
      '/a/b.txt',
      '/static/*',
    ]);
    const cases: [string, RegExp][] = [
      ['healthz', /starts with \//],
      ['/.svc/auth/v1/me', /under \/\.svc\//],
      ['/.svc/*', /under \/\.svc\//],
      ['/.svc', /under \/\.svc\//],
      ['/.SVC/jwks.json', /under \/\.svc\//],
      ['/public*', /a \* may only end a prefix/],
      ['/*/x', /a \* may only end a prefix/],
      ['/a?b=1', /query/],
      ['/a#b', /fragment/],
      ['/a b', /whitespace/],
      ['/a/../b', /"\.\." segment/],
      ['/a//b', /empty/],
      ['/a\\b', /backslash/],
    ];
    for (const [value, why] of cases) {
      const problems = problemsOf({ ':svc/app-public': [value] });
      assert.equal(problems.length, 1, value);
      assert.ok(problems[0]?.startsWith(`:svc/app-public ${JSON.stringify(value)}: `), problems[0]);
      assert.match(problems[0] ?? '', why, value);
    }
    assert.match(problemsOf({ ':svc/app-public': '/healthz' })[0] ?? '', /^:svc\/app-public: expected a vector of paths/);
    assert.match(problemsOf({ ':svc/app-public': [kw('x')] })[0] ?? '', /^:svc\/app-public: expected a vector/);
  });

  test(':svc/app-identity-headers are header names, stored as the gateway compares them (lower-cased, separators as -), and never framing or credential headers', () => {
    assert.deepEqual(load({ ':svc/app-identity-headers': ['X-Tenant', 'x-tenant', 'X_TENANT', 'x-team'] }).identityHeaders, [
      'x-tenant',
      'x-team',
    ]);
    for (const bad of ['x tenant', 'x:tenant', '', 'é']) {
      assert.match(problemsOf({ ':svc/app-identity-headers': [bad] })[0] ?? '', /not a header name/, bad);
    }
    for (const framing of ['Authorization', 'host', 'Content-Length', 'transfer_encoding']) {
      assert.match(problemsOf({ ':svc/app-identity-headers': [framing] })[0] ?? '', /cannot be stripped/, framing);
    }
    assert.match(problemsOf({ ':svc/app-identity-headers': m({}) })[0] ?? '', /expected a vector of header names/);
  });

  test(':svc/app-require maps path patterns to requirements; unknown keys, empty or ill-typed ones are refused', () => {
    const cases: [EdnValue, RegExp][] = [
      [m({ '/admin/*': m({}) }), /"\/admin\/\*": an empty requirement says nothing/],
      [m({ '/admin/*': m({ ':subjects': [] }) }), /:subjects: expected a non-empty vector of subject ids/],
      [m({ '/admin/*': m({ ':subjects': ['alice'] }) }), /:subjects: expected a non-empty vector of subject ids/],
      [m({ '/admin/*': m({ ':amr': ['pass word'] }) }), /:amr: expected a non-empty vector of authentication method names/],
      [m({ '/admin/*': m({ ':max-auth-age-seconds': 0 }) }), /:max-auth-age-seconds: expected a whole number of seconds from 1/],
      [m({ '/admin/*': m({ ':max-auth-age-seconds': 1.5 }) }), /:max-auth-age-seconds: expected a whole number/],
      [m({ '/admin/*': m({ ':max-auth-age-seconds': 31_536_001 }) }), /:max-auth-age-seconds: expected a whole number/],
      [m({ '/admin/*': m({ ':roles': ['x'] }) }), /:roles: unknown key/],
      [m({ '/admin/*': m({ ':groups': [] }) }), /"\/admin\/\*" :groups: expected a non-empty vector of group names/],
      [m({ '/admin/*': m({ ':groups': ['Ops'] }) }), /:groups: expected a non-empty vector of group names .*found string "Ops"/],
      [m({ '/admin/*': m({ ':groups': ['tour guides'] }) }), /:groups: expected a non-empty vector of group names/],
      [m({ '/admin/*': m({ ':groups': ['-ops'] }) }), /:groups: expected a non-empty vector of group names/],
      [m({ '/admin/*': m({ ':groups': 'ops' }) }), /:groups: expected a non-empty vector of group names/],
      [m({ '/admin/*': m({ ':email-domains': ['@example.com'] }) }), /:email-domains: expected a non-empty vector of email domains/],
      [m({ '/admin/*': m({ ':email-domains': ['example'] }) }), /:email-domains: expected a non-empty vector of email domains/],
      [m({ '/admin/*': m({ ':email-domains': ['exa mple.com'] }) }), /:email-domains: expected a non-empty vector of email domains/],
      [m({ '/admin/*': m({ ':email-domains': [] }) }), /:email-domains: expected a non-empty vector of email domains/],
      [m({ '/admin/*': [SUB] }), /expected a map such as/],
      [m({ 'admin/*': m({ ':amr': ['ed25519'] }) }), /starts with \//],
      [m({ '/.svc/auth/*': m({ ':amr': ['ed25519'] }) }), /under \/\.svc\//],
      [m({ ':admin': m({ ':amr': ['ed25519'] }) }), /path patterns are strings/],
      [[SUB], /^:svc\/app-require: expected a map of path pattern/],
    ];
    for (const [value, why] of cases) {
      const problems = problemsOf({ ':svc/app-require': value });
      assert.ok(
        problems.some((p) => why.test(p)),
        `${why}: ${problems.join(' | ')}`,
      );
    }
  });

  test('a requirement on a public path is refused: it could never apply (no false sense of protection)', () => {
    const problems = problemsOf({
      ':svc/app-public': ['/public/*', '/healthz'],
      ':svc/app-require': m({ '/public/admin/*': m({ ':amr': ['ed25519'] }), '/healthz': m({ ':amr': ['ed25519'] }) }),
    });
    assert.equal(problems.length, 2);
    assert.match(problems[0] ?? '', /"\/public\/admin\/\*": the path is public \("\/public\/\*"/);
    assert.match(problems[1] ?? '', /"\/healthz": the path is public/);
    // A requirement that merely covers a public path is fine: the public one goes without a principal.
    assert.equal(
      load({ ':svc/app-public': ['/healthz'], ':svc/app-require': m({ '/*': m({ ':amr': ['ed25519'] }) }) }).requirements.length,
      1,
    );
  });

  test(':svc/app-tls is {:cert :key}, both required, nothing else', () => {
    assert.deepEqual(load({ ':svc/app-tls': m({ ':cert': '/etc/tls/c.pem', ':key': '/etc/tls/k.pem' }) }).tls, {
      cert: '/etc/tls/c.pem',
      key: '/etc/tls/k.pem',
    });
    assert.deepEqual(problemsOf({ ':svc/app-tls': m({ ':cert': 'c.pem' }) }), [
      ":svc/app-tls :key: expected the private key's PEM file path, found nothing",
    ]);
    assert.deepEqual(problemsOf({ ':svc/app-tls': m({ ':cert': 'c.pem', ':key': 'k.pem', ':ca': 'ca.pem' }) }), [
      ':svc/app-tls :ca: unknown key; expected :cert and :key',
    ]);
    assert.match(problemsOf({ ':svc/app-tls': 'c.pem' })[0] ?? '', /^:svc\/app-tls: expected \{:cert "cert.pem" :key "key.pem"\}/);
  });

  test(':svc/app-trusted-proxies are IP addresses or CIDR blocks within bounds, never "everyone"', () => {
    const good = [
      '10.0.0.0/8',
      '192.0.2.7',
      '192.0.2.7/32',
      '::1',
      'fd00::/8',
      '::ffff:10.0.0.1',
      '2001:db8::/128',
      'loopback',
      'uniquelocal',
    ];
    assert.deepEqual(load({ ':svc/app-trusted-proxies': good }).trustedProxies, good);
    for (const bad of [
      '10.0.0.0/33',
      '::/129',
      '10.0.0.0/08',
      '127.1',
      '010.0.0.1',
      'proxy.internal',
      'fe80::1%eth0',
      '10.0.0.0/',
      'Loopback',
      'private',
    ]) {
      assert.match(problemsOf({ ':svc/app-trusted-proxies': [bad] })[0] ?? '', /not an IP address or CIDR block/, bad);
    }
    for (const everyone of ['0.0.0.0/0', '::/0']) {
      assert.match(problemsOf({ ':svc/app-trusted-proxies': [everyone] })[0] ?? '', /trusting every address/, everyone);
    }
  });

  test('unknown :svc/app-* keys are refused, and every profile is checked whether chosen or not', () => {
    assert.match(problemsOf({ ':svc/app-listn': '127.0.0.1:8080' })[0] ?? '', /^:svc\/app-listn: unknown key/);
    const profiles = m({
      ':dev': m({ ':svc/app-listen': '127.0.0.1:0', ':svc/app-public': ['/*'] }),
      ':prod': m({ ':svc/app-public': ['/.svc/jwks.json'], ':svc/app-trusted-proxies': ['0.0.0.0/0'] }),
    });
    const problems = problemsOf({ ':svc/profiles': profiles });
    assert.equal(problems.length, 2, problems.join(' | '));
    assert.ok(problems[0]?.startsWith(':svc/profiles :prod :svc/app-public "/.svc/jwks.json": '), problems[0]);
    assert.ok(problems[1]?.startsWith(':svc/profiles :prod :svc/app-trusted-proxies "0.0.0.0/0": '), problems[1]);
    // The valid profile, when chosen alone, is refused too: the other one is still checked.
    assert.throws(
      () => validateProjectConfig(project({ ':svc/profiles': profiles }), { file: 'p/project.edn', profile: 'dev' }),
      ConfigError,
    );
    const ok = validateProjectConfig(
      project({ ':svc/app-listen': '127.0.0.1:8080', ':svc/profiles': m({ ':dev': m({ ':svc/app-listen': 'off' }) }) }),
      { file: 'p/project.edn', profile: 'dev' },
    );
    assert.equal(ok.app.listen, 'off');
  });
});

describe('the pure address checks core uses at load', () => {
  test('ipVersion agrees with node:net isIP on the strict spellings, and refuses zone indexes', () => {
    const samples = [
      '0.0.0.0',
      '255.255.255.255',
      '256.0.0.1',
      '1.2.3',
      '01.2.3.4',
      '1.2.3.4.5',
      '::',
      '::1',
      '1::',
      '1:2:3:4:5:6:7:8',
      '1:2:3:4:5:6:7::',
      '1:2:3:4:5:6:7:8:9',
      '1::2::3',
      ':1:2:3:4:5:6:7',
      '::ffff:1.2.3.4',
      '1:2:3:4:5:6:1.2.3.4',
      '1:2:3:4:5:6:7:1.2.3.4',
      'abcd:ef01::12345',
      'g::1',
      '',
      'localhost',
    ];
    for (const s of samples) assert.equal(ipVersion(s), isIP(s), s);
    assert.equal(ipVersion('fe80::1%eth0'), 0);
  });

  test('isIpOrCidr and cidrPrefixLength check the prefix against the address family', () => {
    assert.ok(isIpOrCidr('10.0.0.0/32') && !isIpOrCidr('10.0.0.0/33') && isIpOrCidr('::/128') && !isIpOrCidr('::/129'));
    assert.equal(cidrPrefixLength('10.1.0.0/16'), 16);
    assert.equal(cidrPrefixLength('10.1.0.0'), 32);
    assert.equal(cidrPrefixLength('fd00::'), 128);
    assert.equal(cidrPrefixLength('x/1'), null);
  });

  test('appListenProblem and appPathPatternProblem are usable on their own', () => {
    assert.equal(appListenProblem('off'), null);
    assert.equal(appListenProblem('[::1]:0'), null);
    assert.notEqual(appListenProblem('[127.0.0.1]:80'), null);
    assert.equal(appPathPatternProblem('/x/*'), null);
    assert.notEqual(appPathPatternProblem('/.svc/'), null);
  });
});

test('upstream mode and module mode exclude each other: :svc/app-upstream with a module activating :svc/app is refused', () => {
  const value = project({
    ':svc/app-upstream': 'http://127.0.0.1:3000',
    ':svc/packages': m({
      'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }),
      'my-app': m({ ':version': '1.0.0', ':sha256': 'b'.repeat(64) }),
    }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
      ':web': m({ ':package': 'my-app', ':activate': [kw('svc/app')] }),
    }),
  });
  try {
    validateProjectConfig(value, { file: 'p/project.edn' });
    assert.fail('expected a ConfigError');
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    assert.ok(
      e.problems.some((p) => p.key === ':svc/app-upstream' && /upstream mode and module mode exclude each other.*:web/.test(p.message)),
      e.message,
    );
  }
});
