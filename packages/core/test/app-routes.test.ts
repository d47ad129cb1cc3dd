// Many applications behind one gateway (`:svc/app-routes`, issue #28 part 1): the pure matching
// rule (core's appRouteTable and requestOrigin) and the config reader. The attacks on matching
// are named after the attack; the gateway applying them is server/test/gateway-routes.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AppRoute,
  appRouteTable,
  ConfigError,
  type EdnValue,
  parseRouteFrom,
  requestOrigin,
  validateProjectConfig,
} from '@svc/core/config';
import { unambiguousPath } from '../src/gateway-policy.js';

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));

function project(extra: Record<string, EdnValue> = {}, modules: Record<string, EdnValue> = {}): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
      ...modules,
    }),
    ...extra,
  });
}

const routesOf = (routes: EdnValue[], extra: Record<string, EdnValue> = {}): readonly AppRoute[] =>
  validateProjectConfig(project({ ':svc/app-routes': routes, ...extra }), { file: 'p/project.edn' }).app.routes ?? [];

function problemsOf(extra: Record<string, EdnValue>, modules: Record<string, EdnValue> = {}): string[] {
  try {
    validateProjectConfig(project(extra, modules), { file: 'p/project.edn' });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.problems.map((p) => `${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

/** The contract's example, plus a second route on the wiki's host and a deeper prefix. */
const CONTRACT_ROUTES: EdnValue[] = [
  m({
    ':from': 'https://grafana.example.com',
    ':to': 'http://127.0.0.1:3000',
    ':public': ['/api/health'],
    ':require': m({ ':groups': ['ops'] }),
  }),
  m({ ':from': 'https://tools.example.com/wiki/*', ':to': 'http://127.0.0.1:3001', ':require': m({ ':email-domains': ['example.com'] }) }),
  m({ ':from': 'https://tools.example.com', ':to': 'http://127.0.0.1:3002' }),
  m({ ':from': 'https://tools.example.com/wiki/admin/*', ':to': 'http://127.0.0.1:3003', ':audience': 'wiki-admin' }),
  m({ ':from': 'http://localhost:8080/docs/*', ':to': 'http://127.0.0.1:3004' }),
];

describe(':svc/app-routes: matching a request to its route', () => {
  const routes = routesOf(CONTRACT_ROUTES);
  const table = appRouteTable(routes);
  /** The `:to` of the route a request is for, or null: as the gateway reads it (scheme, Host, raw target). */
  const to = (scheme: string, host: string | undefined, target: string) =>
    table.match(requestOrigin(scheme, host), unambiguousPath(target))?.to ?? null;

  test('the contract example reads as written: origin, prefix, upstream, public paths, requirement, audience', () => {
    assert.equal(routes.length, 5);
    const [grafana, wiki, tools, wikiAdmin] = routes as [AppRoute, AppRoute, AppRoute, AppRoute];
    assert.deepEqual(
      { ...grafana, requirement: grafana.requirement?.groups },
      {
        index: 0,
        from: 'https://grafana.example.com',
        origin: 'https://grafana.example.com',
        prefix: null,
        to: 'http://127.0.0.1:3000',
        publicPaths: ['/api/health'],
        requirement: ['ops'],
        audience: 'http://127.0.0.1:3000',
      },
    );
    assert.equal(grafana.requirement?.path, '/*', 'an origin-only route requires everywhere but its public paths');
    assert.equal(wiki.prefix, '/wiki/*');
    assert.equal(wiki.requirement?.path, '/wiki/*');
    assert.deepEqual(wiki.requirement?.emailDomains, ['example.com']);
    assert.equal(tools.requirement, null, 'no :require: signed in is enough');
    assert.equal(wikiAdmin.audience, 'wiki-admin');
    assert.equal(wiki.audience, 'http://127.0.0.1:3001', 'the audience defaults to the :to origin');
  });

  test('the most specific route wins: the longest prefix, then the origin-only route', () => {
    assert.equal(to('https', 'grafana.example.com', '/d/abc'), 'http://127.0.0.1:3000');
    assert.equal(to('https', 'tools.example.com', '/wiki/Main_Page'), 'http://127.0.0.1:3001');
    assert.equal(to('https', 'tools.example.com', '/wiki'), 'http://127.0.0.1:3001', 'the bare prefix is the route');
    assert.equal(to('https', 'tools.example.com', '/wiki/'), 'http://127.0.0.1:3001');
    assert.equal(to('https', 'tools.example.com', '/wiki/admin/users'), 'http://127.0.0.1:3003');
    assert.equal(to('https', 'tools.example.com', '/wiki/admin'), 'http://127.0.0.1:3003');
    assert.equal(to('https', 'tools.example.com', '/'), 'http://127.0.0.1:3002');
    assert.equal(to('https', 'tools.example.com', '/other?wiki/x'), 'http://127.0.0.1:3002', 'the query never counts');
    assert.equal(to('http', 'localhost:8080', '/docs/a'), 'http://127.0.0.1:3004');
  });

  test('unknown host: no route, whatever the path', () => {
    assert.equal(to('https', 'evil.example', '/'), null);
    assert.equal(to('https', 'evil.example', '/wiki/x'), null);
    assert.equal(to('https', undefined, '/'), null, 'no Host at all (HTTP/1.0)');
    assert.equal(to('https', '', '/'), null);
  });

  test('a path no prefix route of a host covers, on a host without an origin-only route: no route', () => {
    assert.equal(to('http', 'localhost:8080', '/'), null);
    assert.equal(to('http', 'localhost:8080', '/docsx'), null);
  });

  test('attack: Host letter case (GRAFANA.Example.COM) matches the same route, never another', () => {
    assert.equal(to('https', 'GRAFANA.Example.COM', '/'), 'http://127.0.0.1:3000');
    assert.equal(to('https', 'Tools.EXAMPLE.com', '/wiki/x'), 'http://127.0.0.1:3001');
  });

  test('attack: Host port tricks: the default port is the same origin, any other port is not', () => {
    assert.equal(to('https', 'grafana.example.com:443', '/'), 'http://127.0.0.1:3000', ':443 on https is the default port');
    assert.equal(to('https', 'grafana.example.com:8443', '/'), null, 'another port is another origin');
    assert.equal(to('http', 'grafana.example.com', '/'), null, 'plain http is another origin than https');
    assert.equal(to('http', 'grafana.example.com:443', '/'), null, 'port 443 over plain http is not the https origin');
    assert.equal(to('http', 'localhost', '/docs/a'), null, 'the route names port 8080');
    assert.equal(to('http', 'localhost:80', '/docs/a'), null);
    assert.equal(to('http', 'localhost:08080', '/docs/a'), null, 'a port spelled otherwise (leading zero) is not matched: exact');
    assert.equal(to('https', 'grafana.example.com:99999', '/'), null, 'an out-of-range port is no origin');
  });

  test('attack: Host look-alikes (trailing dot, suffix, prefix, user part, two hosts) match nothing', () => {
    for (const host of [
      'grafana.example.com.',
      'grafana.example.com.evil.example',
      'evil-grafana.example.com',
      'x.grafana.example.com',
      'evil.example@grafana.example.com',
      'grafana.example.com@evil.example',
      'grafana.example.com, evil.example',
      'grafana.example.com evil.example',
      'grafana.example.com/x',
      'grafana.example.com:443:443',
    ]) {
      assert.equal(to('https', host, '/'), null, host);
    }
  });

  test('attack: an absolute-form request target (GET http://other.host/ HTTP/1.1) is refused, never matched by its own host', () => {
    assert.throws(
      () => to('https', 'tools.example.com', 'https://grafana.example.com/'),
      (e: Error & { code?: string }) => e.code === 'invalid_request',
    );
  });

  test('attack: path prefix boundary: /wiki-private and /wikipedia are not under /wiki/*', () => {
    assert.equal(to('https', 'tools.example.com', '/wiki-private'), 'http://127.0.0.1:3002');
    assert.equal(to('https', 'tools.example.com', '/wiki-private/x'), 'http://127.0.0.1:3002');
    assert.equal(to('https', 'tools.example.com', '/wikipedia'), 'http://127.0.0.1:3002');
    assert.equal(to('https', 'tools.example.com', '/wiki/admin-x'), 'http://127.0.0.1:3001', '/wiki/admin/* does not cover /wiki/admin-x');
  });

  test('attack: a percent-encoded prefix (/%77iki/, /wiki%2fadmin) goes where the upstream will read it, or is refused', () => {
    assert.equal(to('https', 'tools.example.com', '/%77iki/x'), 'http://127.0.0.1:3001', 'the decoded /wiki/x');
    assert.equal(to('https', 'tools.example.com', '/wiki/%61dmin/x'), 'http://127.0.0.1:3003');
    assert.throws(() => to('https', 'tools.example.com', '/wiki%2fadmin/x'), /percent-encodes/);
    assert.throws(() => to('https', 'tools.example.com', '/x/..%2fwiki/admin'), /percent-encodes/);
    assert.throws(() => to('https', 'tools.example.com', '/x/../wiki/admin'), /dot segment/);
  });

  test('attack: path letter case (/WIKI/Admin) falls under the same route as /wiki/admin, never a weaker one', () => {
    assert.equal(to('https', 'tools.example.com', '/WIKI/x'), 'http://127.0.0.1:3001');
    assert.equal(to('https', 'tools.example.com', '/Wiki/ADMIN/x'), 'http://127.0.0.1:3003');
  });

  test('matching looks routes up, never scans them: a hundred routes on one host match as one does', () => {
    const many: EdnValue[] = [];
    for (let i = 0; i < 100; i++) many.push(m({ ':from': `https://h${i}.example.com/app${i}/*`, ':to': `http://127.0.0.1:${4000 + i}` }));
    const big = appRouteTable(routesOf(many));
    assert.equal(big.match('https://h57.example.com', '/app57/x')?.to, 'http://127.0.0.1:4057');
    assert.equal(big.match('https://h57.example.com', '/app58/x'), null);
    assert.equal(big.serves('https://h99.example.com'), true);
    assert.equal(big.serves('https://h100.example.com'), false);
  });
});

describe(':svc/app-routes in project.edn', () => {
  test(':from spellings: canonical origin, /* alone is the whole origin, the path kept as written', () => {
    assert.deepEqual(parseRouteFrom('HTTPS://Grafana.Example.com:443/'), { origin: 'https://grafana.example.com', prefix: null });
    assert.deepEqual(parseRouteFrom('https://grafana.example.com/*'), { origin: 'https://grafana.example.com', prefix: null });
    assert.deepEqual(parseRouteFrom('http://[::1]:8080/Wiki/*'), { origin: 'http://[::1]:8080', prefix: '/Wiki/*' });
  });

  test('every problem is reported at once, each naming its route by position and :from', () => {
    const problems = problemsOf({
      ':svc/app-routes': [
        m({ ':from': 'https://ok.example.com', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://tools.example.com/wiki', ':to': 'http://127.0.0.1:3001' }),
        m({ ':from': 'https://tools.example.com/wiki/*', ':to': 'ftp://127.0.0.1', ':require': m({ ':groups': ['Not A Group'] }) }),
        m({ ':from': 'https://u:p@x.example.com', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://x.example.com/?q=1', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://x.example.com/#f', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://OK.example.com:443/', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://x.example.com/.svc/*', ':to': 'http://127.0.0.1:3000' }),
        m({ ':from': 'https://x.example.com/a/*', ':to': 'http://127.0.0.1:3000', ':public': ['/b/c'], ':color': 'red' }),
        m({ ':from': 'https://x.example.com/%61/*', ':to': 'http://127.0.0.1:3000' }),
        m({ ':to': 'http://127.0.0.1:3000' }),
        'https://y.example.com',
        m({ ':from': 'https://z.example.com', ':to': 'http://127.0.0.1:3000/app', ':audience': '' }),
      ],
    });
    const expect = [
      /^:svc\/app-routes\[1\] \("https:\/\/tools\.example\.com\/wiki"\) :from: a route's path is a prefix ending in \/\*/,
      /^:svc\/app-routes\[2\] \("https:\/\/tools\.example\.com\/wiki\/\*"\) :to: expected the upstream's http:\/\/ or https:\/\/ origin/,
      /^:svc\/app-routes\[2\] \("https:\/\/tools\.example\.com\/wiki\/\*"\) :require :groups: expected a non-empty vector of group names/,
      /^:svc\/app-routes\[3\] \("https:\/\/u:p@x\.example\.com"\) :from: no user or password/,
      /^:svc\/app-routes\[4\] .* :from: no query/,
      /^:svc\/app-routes\[5\] .* :from: no query \(\?\) or fragment/,
      /^:svc\/app-routes\[6\] \("https:\/\/OK\.example\.com:443\/"\) :from: :svc\/app-routes\[0\] already routes https:\/\/ok\.example\.com/,
      /^:svc\/app-routes\[7\] .* :from: paths under \/\.svc\/ are the gateway's own/,
      /^:svc\/app-routes\[8\] .* :color: unknown key/,
      /^:svc\/app-routes\[8\] .* :public "\/b\/c": the path is not under the route's \/a\/\*/,
      /^:svc\/app-routes\[9\] .* :from: write the path as it reads decoded/,
      /^:svc\/app-routes\[10\] :from: expected the origin browsers reach the application at/,
      /^:svc\/app-routes\[11\]: expected a map such as/,
      /^:svc\/app-routes\[12\] \("https:\/\/z\.example\.com"\) :to: .*the origin only/,
      /^:svc\/app-routes\[12\] \("https:\/\/z\.example\.com"\) :audience: expected the assertion audience/,
    ];
    for (const re of expect)
      assert.ok(
        problems.some((p) => re.test(p)),
        `${re}\nin:\n${problems.join('\n')}`,
      );
    assert.equal(problems.length, expect.length, problems.join('\n'));
  });

  test('an empty vector, or something else than a vector, is refused', () => {
    assert.match(problemsOf({ ':svc/app-routes': [] }).join('\n'), /^:svc\/app-routes: expected a non-empty vector of routes/);
    assert.match(problemsOf({ ':svc/app-routes': 'https://x' }).join('\n'), /^:svc\/app-routes: expected a non-empty vector/);
  });

  test('routes exclude the one-route shorthand and its settings, and :svc/app modules', () => {
    const route = [m({ ':from': 'https://a.example.com', ':to': 'http://127.0.0.1:3000' })];
    const problems = problemsOf({
      ':svc/app-routes': route,
      ':svc/app-upstream': 'http://127.0.0.1:3000',
      ':svc/app-public': ['/healthz'],
      ':svc/app-require': m({ '/admin/*': m({ ':groups': ['ops'] }) }),
      ':svc/app-audience': 'x',
      ':svc/app-public-origin': 'https://a.example.com',
    });
    for (const key of [':svc/app-upstream', ':svc/app-public', ':svc/app-require', ':svc/app-audience', ':svc/app-public-origin']) {
      assert.ok(
        problems.some((p) => p.startsWith(`${key}: :svc/app-routes and ${key} exclude each other`)),
        `${key}:\n${problems.join('\n')}`,
      );
    }
    const withModule = problemsOf(
      {
        ':svc/app-routes': route,
        ':svc/packages': m({
          'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }),
          'my-app': m({ ':version': '1.0.0', ':sha256': 'b'.repeat(64) }),
        }),
      },
      { ':web': m({ ':package': 'my-app', ':activate': [kw('svc/app')] }) },
    );
    assert.ok(
      withModule.some((p) => p.startsWith(':svc/app-routes: routes and module mode exclude each other')),
      withModule.join('\n'),
    );
  });

  test('a profile may override the routes', () => {
    const config = validateProjectConfig(
      project({
        ':svc/app-routes': [m({ ':from': 'https://a.example.com', ':to': 'http://127.0.0.1:3000' })],
        ':svc/profiles': m({
          ':dev': m({ ':svc/app-routes': [m({ ':from': 'http://a.localhost:8080', ':to': 'http://127.0.0.1:3000' })] }),
        }),
      }),
      { file: 'p/project.edn', profile: 'dev' },
    );
    assert.deepEqual(
      config.app.routes?.map((r) => r.from),
      ['http://a.localhost:8080'],
    );
  });
});
