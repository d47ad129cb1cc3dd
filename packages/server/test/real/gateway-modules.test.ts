import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { updateUser } from '@svc/core';
import { WebSocket } from 'ws';
import { moduleHostNodeArgs } from '../../src/gateway/module-host.js';
import { type AppModule, ModuleHostError, startModuleHost } from '../../src/index.js';
import { within } from '../support/bounded.js';
import { applicationUser, type GatewayHarness, gatewayApi, startGatewayHarness } from '../support/gateway-harness.js';
import { loopbackCertificate } from '../support/loopback-cert.js';
import { fixtureModule, moduleModeAttach, writeModulePackage } from '../support/module-host.js';
import { scratch } from '../support/node-harness.js';
import { rawRequest } from '../support/raw-http.js';

// Module mode of the application gateway (spec rule 1: identity is established before
// application modules run; a package loaded into the application cannot replace it). The modules
// run in their confined process (startModuleHost); the gateway forwards each request after its
// strip and authenticate steps. A hostile module (fixtures/app-modules/hostile-app) tries every
// way around identity we know of and reports over real HTTP whether it worked; a well-behaved one
// reads request.principal. (The attacks on the service's own state, control.db, keys and
// environment, go through the real `svc serve`: cli/test/app-module-confinement.test.ts.)

const FORGED = 'forged-admin';
const REFUSED = /^refused: /;

describe('module mode: request.principal.claims carries who the caller is, across the module socket, frozen', () => {
  let h: GatewayHarness;
  let token: string;
  let subject: string;
  let closeModules: () => Promise<void> = async () => {};
  const actor = { via: 'cli', subject: null, session: null } as const;

  before(async () => {
    const modules = await moduleModeAttach([fixtureModule('good-app')]);
    closeModules = modules.close;
    h = await startGatewayHarness({ attach: modules.attach });
    token = (await applicationUser(h)).pair.access_token;
    subject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token })).body.subject;
  });
  after(async () => {
    await h?.close();
    await closeModules();
  });

  test('email (A-label), email_verified, name (any script) and groups reach the module as the gateway read them; no change sticks', async () => {
    await updateUser(h.deps, {
      subject,
      attributes: { name: 'Zoë Ångström 山田', email: 'zoe@bücher.example', email_verified: true, groups: ['ops', 'admins'] },
      actor,
      source: 'operator',
    });
    const r = await gatewayApi(h, 'GET', '/whoami', { token, headers: { 'svc-email': 'boss@example.com', 'svc-groups': 'root' } });
    assert.equal(r.status, 200, r.text);
    const { amr, auth_time, exp, ...who } = r.body.claims;
    assert.deepEqual(who, {
      email: 'zoe@xn--bcher-kva.example',
      email_verified: true,
      name: 'Zoë Ångström 山田',
      groups: ['admins', 'ops'],
    });
    assert.ok(Array.isArray(amr) && typeof auth_time === 'string' && typeof exp === 'string');
    assert.equal(r.body.frozen, true);
    for (const [attack, outcome] of Object.entries(r.body.attempts)) assert.match(String(outcome), REFUSED, attack);
  });

  test('unknown attributes are absent from the claims, never empty', async () => {
    await updateUser(h.deps, { subject, attributes: { name: null, email: null, groups: [] }, actor, source: 'operator' });
    const r = await gatewayApi(h, 'GET', '/whoami', { token });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(Object.keys(r.body.claims).sort(), ['amr', 'auth_time', 'exp']);
  });
});

describe('module mode: application modules run after identity and cannot replace it', () => {
  let h: GatewayHarness;
  let token: string;
  let subject: string;
  let closeModules: () => Promise<void> = async () => {};

  before(async () => {
    const modules = await moduleModeAttach([fixtureModule('good-app'), fixtureModule('hostile-app')]);
    closeModules = modules.close;
    h = await startGatewayHarness({ attach: modules.attach });
    const user = await applicationUser(h);
    token = user.pair.access_token;
    const me = await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token });
    subject = me.body.subject;
    assert.ok(typeof subject === 'string' && subject.length > 0);
  });
  after(async () => {
    await h?.close();
    await closeModules();
  });

  test('a well-behaved module reads the frozen principal on an authenticated route and null on a public one', async () => {
    const hello = await gatewayApi(h, 'GET', '/hello', { token });
    assert.equal(hello.status, 200);
    assert.deepEqual(hello.body, { hello: subject, realm: 'application', session: hello.body.session });
    assert.ok(typeof hello.body.session === 'string');
    const pub = await gatewayApi(h, 'GET', '/public/hello');
    assert.equal(pub.status, 200);
    assert.deepEqual(pub.body, { principal: null });
    const anonymous = await gatewayApi(h, 'GET', '/hello');
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, 'invalid_token');
  });

  test('skip-override onRequest hook forging a principal: it runs after identity and cannot redefine the principal', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/hook', { token, headers: { 'svc-subject': FORGED } });
    assert.equal(r.status, 200);
    assert.equal(r.body.hook.ran, true);
    // When the module's hook ran, identity had already run: the principal was set, the forged header gone.
    assert.equal(r.body.hook.principalWhenHookRan, subject);
    assert.equal(r.body.hook.forgedHeaderWhenHookRan, null);
    assert.match(r.body.hook.definePrincipal, REFUSED);
    assert.equal(r.body.principal, subject);
  });

  test('skip-override onRequest hook on an unauthenticated request: refused 401 before the hook runs', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/hook', { headers: { 'svc-subject': FORGED } });
    assert.equal(r.status, 401);
    assert.equal(r.body.code, 'invalid_token');
  });

  test('reassign, redefine, delete or mutate request.principal: every attempt fails and the principal is unchanged', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/principal', { token });
    assert.equal(r.status, 200);
    for (const attack of ['assign', 'define', 'defineGetter', 'delete', 'reflectDelete', 'mutateSubject', 'mutateClaims']) {
      assert.match(r.body[attack], REFUSED, `${attack}: ${r.body[attack]}`);
    }
    assert.equal(r.body.before, subject);
    assert.equal(r.body.after, subject);
    // A principal defined on the request prototype is shadowed by the gateway's own property.
    const again = await gatewayApi(h, 'GET', '/hostile/hook', { token });
    assert.equal(again.body.principal, subject);
    assert.equal((await gatewayApi(h, 'GET', '/public/hello')).body.principal, null);
  });

  test('strip bypass through the raw server (prepend, remove, replace emit, via app.server or request.raw.socket.server): every attempt fails', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/raw-server', { token });
    assert.equal(r.status, 200);
    for (const when of ['atLoad', 'atRequest'] as const) {
      for (const [attack, outcome] of Object.entries(r.body[when] as Record<string, string>)) {
        assert.match(outcome, REFUSED, `${when} ${attack}: ${outcome}`);
      }
    }
    // And the gateway still strips and authenticates first: no bypass listener answers.
    const anonymous = await gatewayApi(h, 'GET', '/hostile/echo-identity', { headers: { 'svc-subject': FORGED } });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.bypassed, undefined);
    const expect = await rawRequest(h.gatewayPort, {
      method: 'POST',
      target: '/hostile/echo-identity',
      headers: [
        ['Expect', '100-continue'],
        ['Svc-Subject', FORGED],
      ],
      body: '{}',
    });
    assert.notEqual(expect.status, 200);
    assert.equal(expect.body?.bypassed, undefined);
    const upgrade = await rawRequest(h.gatewayPort, {
      target: '/hostile/echo-identity',
      headers: [
        ['Upgrade', 'websocket'],
        ['Connection', 'Upgrade'],
        ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='],
        ['Sec-WebSocket-Version', '13'],
        ['Svc-Subject', FORGED],
      ],
    });
    // The module's prepended upgrade listener never sees it: identity refuses it first.
    assert.equal(upgrade.status, 401);
  });

  test('a header-reading route never sees a forged svc-subject (any spelling, any view) nor our bearer token', async () => {
    for (const [path, auth] of [
      ['/hostile/echo-identity', token],
      ['/public/hostile/echo-identity', undefined],
      ['/public/hostile/echo-identity', token],
    ] as const) {
      const r = await gatewayApi(h, 'GET', path, {
        ...(auth === undefined ? {} : { token: auth }),
        headers: { 'svc-subject': FORGED, svc_subject: FORGED, 'x-forwarded-user': FORGED },
      });
      assert.equal(r.status, 200, path);
      assert.equal(r.body.header, null);
      assert.equal(r.body.underscore, null);
      assert.equal(r.body.distinct, null);
      assert.ok(!(r.body.rawHeaders as string[]).includes(FORGED), `${path}: ${JSON.stringify(r.body.rawHeaders)}`);
      assert.equal(r.body.authorization, null);
      assert.equal(r.body.principal, auth === undefined ? null : subject);
    }
  });

  test('reach the control store from what a module is handed (instance, request, reply, their prototypes): not found', async () => {
    const r = await gatewayApi(h, 'GET', '/hostile/find-store', { token });
    assert.equal(r.status, 200);
    assert.equal(r.body.found, null);
  });
});

/**
 * The message of the ModuleHostError that `startModuleHost` refuses `modules` with. A host that
 * starts instead is closed again and the test fails (rather than hang on a live child).
 */
async function refusal(modules: AppModule[]): Promise<string> {
  const outcome = await startModuleHost({ modules }).then(
    async (host) => {
      await host.close();
      return 'started';
    },
    (err: unknown) => err,
  );
  assert.ok(outcome instanceof ModuleHostError, `expected a ModuleHostError, got: ${String(outcome)}`);
  return outcome.message;
}

describe('module mode refuses a module that asks to share the gateway context', () => {
  test('a module exported with skip-override (fastify-plugin) is refused before it serves anything', async () => {
    assert.match(await refusal([fixtureModule('skip-override-app')]), /^application module skip-override-app@1\.0\.0: .*skip-override/);
  });

  test('a module that fails to load names itself, and its process does not start', async () => {
    const dir = scratch();
    try {
      const broken = writeModulePackage(
        dir.dir,
        'broken-app',
        "export async function svcApp() { throw new Error('no database configured'); }\n",
      );
      assert.match(await refusal([broken]), /^application module broken-app@1\.0\.0 failed to load: no database configured$/);
      const notPlugin = writeModulePackage(dir.dir, 'object-app', 'export const svcApp = { routes: [] };\n');
      assert.match(await refusal([notPlugin]), /object-app@1\.0\.0: its svc\/app export "svcApp" is not a Fastify plugin function/);
    } finally {
      dir.cleanup();
    }
  });
});

describe('strip bypass through a raw request listener prepended by a module', () => {
  test('a module that prepends a raw request listener at load cannot answer before identity, nor see forged headers', async () => {
    const dir = scratch();
    const modules = await moduleModeAttach([
      writeModulePackage(
        dir.dir,
        'prepend-app',
        `let attempt = 'not tried';
export async function svcApp(app) {
  try {
    app.server.prependListener('request', (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ bypassed: true, svcSubject: req.headers['svc-subject'] ?? null }));
    });
    attempt = 'succeeded';
  } catch (err) {
    attempt = 'refused: ' + err.name;
  }
  app.get('/public/attempt', async () => ({ attempt }));
}
`,
      ),
    ]);
    const h = await startGatewayHarness({ attach: modules.attach });
    try {
      const attempt = await gatewayApi(h, 'GET', '/public/attempt');
      assert.equal(attempt.status, 200);
      assert.match(attempt.body.attempt, REFUSED);
      const r = await gatewayApi(h, 'GET', '/anything', { headers: { 'svc-subject': FORGED } });
      assert.equal(r.status, 401);
      assert.equal(r.body.code, 'invalid_token');
    } finally {
      await h.close();
      await modules.close();
      dir.cleanup();
    }
  });
});

describe('strip bypass through a raw connection listener prepended by a module', () => {
  test('a module that prepends a connection listener writing its own response cannot answer before identity', async () => {
    const dir = scratch();
    const modules = await moduleModeAttach([
      writeModulePackage(
        dir.dir,
        'connection-app',
        `let attempt = 'not tried';
export async function svcApp(app) {
  try {
    app.server.prependListener('connection', (socket) => {
      const body = JSON.stringify({ bypassed: true });
      socket.write('HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: ' + body.length + '\\r\\nconnection: close\\r\\n\\r\\n' + body);
      socket.end();
    });
    attempt = 'succeeded';
  } catch (err) {
    attempt = 'refused: ' + err.name;
  }
  app.get('/public/attempt', async () => ({ attempt }));
}
`,
      ),
    ]);
    const h = await startGatewayHarness({ attach: modules.attach });
    try {
      assert.match((await gatewayApi(h, 'GET', '/public/attempt')).body.attempt, REFUSED);
      const r = await rawRequest(h.gatewayPort, { target: '/anything', headers: [['Svc-Subject', FORGED]] });
      assert.equal(r.status, 401);
      assert.equal(r.body?.bypassed, undefined);
    } finally {
      await h.close();
      await modules.close();
      dir.cleanup();
    }
  });
});

describe('module mode over HTTPS', () => {
  test("the TLS gateway serves modules after identity; a module stripping its server's listeners cannot reach the gateway's TLS listener", async () => {
    const dir = scratch();
    try {
      const { key, cert } = loopbackCertificate(dir.dir);
      const modules = await moduleModeAttach([
        fixtureModule('good-app'),
        writeModulePackage(
          dir.dir,
          'tls-grab',
          `let attempt = 'not tried';
export async function svcApp(app) {
  try {
    // The gateway's TLS listener lives in the service's process, out of reach; its own server's
    // request listener is sealed.
    app.server.removeAllListeners('secureConnection');
    app.server.removeAllListeners('request');
    attempt = 'succeeded';
  } catch (err) {
    attempt = 'refused: ' + err.name;
  }
  app.get('/public/attempt', async () => ({ attempt }));
}
`,
        ),
      ]);
      const h = await startGatewayHarness({
        attach: modules.attach,
        gateway: { https: { cert: readFileSync(cert), key: readFileSync(key) } },
      });
      try {
        const get = (path: string) =>
          new Promise<{ status: number; body: string }>((resolve, reject) => {
            const req = httpsRequest({ host: '127.0.0.1', port: h.gatewayPort, path, ca: readFileSync(cert), agent: false }, (res) => {
              let body = '';
              res.on('data', (c) => {
                body += c;
              });
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
            });
            req.on('error', reject);
            req.end();
          });
        assert.match((JSON.parse((await get('/public/attempt')).body) as { attempt: string }).attempt, REFUSED);
        const pub = await get('/public/hello');
        assert.equal(pub.status, 200);
        assert.deepEqual(JSON.parse(pub.body), { principal: null });
        assert.equal((await get('/hello')).status, 401);
      } finally {
        await h.close();
        await modules.close();
      }
    } finally {
      dir.cleanup();
    }
  });
});

/** Polls `check` every 50 ms until it holds; fails naming `what` after `ms`. */
async function waitFor(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('module process faults: a crash or a hang is a 502/504 problem+json, and the process is restarted', () => {
  const FAULTY = `export async function svcApp(app) {
  app.get('/public/ok', async () => ({ ok: true, pid: process.pid }));
  app.get('/public/crash', async () => { process.exit(3); });
  app.get('/public/hang', async () => { for (;;) {} });
}
`;

  test('a module that crashes its process mid-request: 502 upstream_unavailable, then a new process serves', async () => {
    const dir = scratch();
    const modules = await moduleModeAttach([writeModulePackage(dir.dir, 'crash-app', FAULTY)]);
    const h = await startGatewayHarness({ attach: modules.attach });
    try {
      const first = modules.host.pid;
      const ok = await gatewayApi(h, 'GET', '/public/ok');
      assert.equal(ok.status, 200);
      assert.equal(ok.body.pid, first);
      const crash = await gatewayApi(h, 'GET', '/public/crash');
      assert.equal(crash.status, 502);
      assert.equal(crash.body.code, 'upstream_unavailable');
      assert.match(crash.headers.get('content-type') ?? '', /^application\/problem\+json/);
      await waitFor('a restarted module process', () => modules.host.pid !== null && modules.host.pid !== first);
      const again = await gatewayApi(h, 'GET', '/public/ok');
      assert.equal(again.status, 200);
      assert.equal(again.body.pid, modules.host.pid);
    } finally {
      await h.close();
      await modules.close();
      dir.cleanup();
    }
  });

  test('a module that blocks its event loop: 504 upstream_timeout, then it is killed and a new process serves', async () => {
    const dir = scratch();
    const modules = await moduleModeAttach([writeModulePackage(dir.dir, 'hang-app', FAULTY)], {
      connectMs: 1_000,
      responseMs: 1_000,
      idleMs: 1_000,
    });
    const h = await startGatewayHarness({ attach: modules.attach });
    try {
      const first = modules.host.pid;
      const hang = await gatewayApi(h, 'GET', '/public/hang');
      assert.equal(hang.status, 504);
      assert.equal(hang.body.code, 'upstream_timeout');
      await waitFor('the stuck module process to be replaced', () => modules.host.pid !== null && modules.host.pid !== first);
      const again = await gatewayApi(h, 'GET', '/public/ok');
      assert.equal(again.status, 200);
      assert.equal(again.body.pid, modules.host.pid);
    } finally {
      await h.close();
      await modules.close();
      dir.cleanup();
    }
  });
});

describe("the module process's socket serves the gateway only", () => {
  test('a local process forging a principal on the module socket (no secret, or a wrong one): no answer, the module never runs', async () => {
    const modules = await moduleModeAttach([fixtureModule('good-app')]);
    try {
      const forged = Buffer.from(
        JSON.stringify({ subject: FORGED, realm: 'application', session: 'ses_x', device: 'dev_x', claims: {} }),
      ).toString('base64url');
      const ask = (headers: Record<string, string>) =>
        new Promise<string>((resolve) => {
          const req = httpRequest({ socketPath: modules.host.socketPath, path: '/public/hello', headers }, (res) => {
            res.resume();
            resolve(`answered ${res.statusCode}`);
          });
          req.on('error', (err: NodeJS.ErrnoException) => resolve(`refused: ${err.code}`));
          req.end();
        });
      assert.match(await ask({ 'svc-module-principal': forged }), /^refused: ECONNRESET$/);
      assert.match(await ask({ 'svc-module-principal': forged, 'svc-module-key': 'x'.repeat(43) }), /^refused: ECONNRESET$/);
      // The gateway's own forwarding (the right secret) is answered.
      assert.equal(await ask(modules.host.forwardHeaders(null)), 'answered 200');
    } finally {
      await modules.close();
    }
  });
});

describe('module mode websockets', () => {
  test('a module serving websockets reads the principal on the raw upgrade, never the forged or private headers', async () => {
    const dir = scratch();
    const wsDir = realpathSync(dirname(createRequire(import.meta.url).resolve('ws/package.json')));
    const module = writeModulePackage(
      dir.dir,
      'ws-app',
      `import { WebSocketServer } from 'ws';
export async function svcApp(app) {
  const wss = new WebSocketServer({ noServer: true });
  app.server.on('upgrade', (req, socket, head) => {
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.send(JSON.stringify({
        subject: req.principal === null ? null : req.principal.subject,
        frozen: Object.isFrozen(req.principal),
        forged: req.headers['svc-subject'] ?? null,
        privateHeaders: Object.keys(req.headers).filter((h) => h.startsWith('svc-')),
      }));
      ws.close();
    });
  });
}
`,
    );
    // The package resolves ws through its own node_modules, as an installed package does.
    mkdirSync(join(module.packageDir, 'node_modules'));
    symlinkSync(wsDir, join(module.packageDir, 'node_modules', 'ws'));
    const modules = await moduleModeAttach([{ ...module, dependencyDirs: [wsDir] }]);
    const h = await startGatewayHarness({ attach: modules.attach });
    try {
      const user = await applicationUser(h);
      const subject = (await gatewayApi(h, 'GET', '/.svc/auth/v1/me', { token: user.pair.access_token })).body.subject;
      const url = `ws://127.0.0.1:${h.gatewayPort}/socket`;
      const first = await within(
        new Promise<string>((resolve, reject) => {
          const ws = new WebSocket(url, { headers: { authorization: `Bearer ${user.pair.access_token}`, 'svc-subject': FORGED } });
          ws.once('message', (data) => resolve(String(data)));
          ws.once('error', reject);
        }),
        20_000,
        "the module's first websocket message",
      );
      assert.deepEqual(JSON.parse(first), { subject, frozen: true, forged: null, privateHeaders: [] });
      const refused = await within(
        new Promise<number>((resolve, reject) => {
          const ws = new WebSocket(url, { headers: { 'svc-subject': FORGED } });
          ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
          ws.once('open', () => reject(new Error('an unauthenticated upgrade reached the module')));
          ws.once('error', () => {});
        }),
        20_000,
        'the refusal of an unauthenticated websocket upgrade',
      );
      assert.equal(refused, 401);
    } finally {
      await h.close();
      await modules.close();
      dir.cleanup();
    }
  });
});

describe('the module process confinement, as started', () => {
  test('the child runs under the permission model: reads only where allowed, no write, process, worker, addon or WASI grant', () => {
    const args = moduleHostNodeArgs(['/srv/app', '/srv/deps/x'], '/svc/dist/gateway/module-host-child.mjs', 512);
    assert.deepEqual(args, [
      '--experimental-permission',
      '--allow-fs-read=/srv/app',
      '--allow-fs-read=/srv/deps/x',
      '--allow-fs-read=/svc/dist/gateway/module-host-child.mjs',
      '--no-addons',
      '--max-old-space-size=512',
      '--disable-warning=ExperimentalWarning',
    ]);
  });

  test('a module package holding a symbolic link to the control directory is not started (the permission model follows links)', async () => {
    const dir = scratch();
    try {
      const control = join(dir.dir, 'control');
      mkdirSync(control);
      const module = writeModulePackage(dir.dir, 'link-app', 'export async function svcApp() {}\n');
      symlinkSync(control, join(module.packageDir, 'control'));
      assert.match(await refusal([module]), /link-app\/control is a symbolic link that leads outside/);
    } finally {
      dir.cleanup();
    }
  });
});

/** Runs `fn` against a gateway in module mode serving one module package, `name`, whose entry is `source`; closes everything after. */
async function withOneModule(name: string, source: string, fn: (h: GatewayHarness) => Promise<void>): Promise<void> {
  const dir = scratch();
  const modules = await moduleModeAttach([writeModulePackage(dir.dir, name, source)]);
  const h = await startGatewayHarness({ attach: modules.attach });
  try {
    await fn(h);
  } finally {
    await h.close();
    await modules.close();
    dir.cleanup();
  }
}

describe('module mode bad input: problem+json from the module process, never a 500', () => {
  test('an-oversized-body-raced-against-the-module-process: refused by the gateway, by its length before a byte is relayed or chunked at the byte past the limit, 413 every time, never a 502', async () => {
    const countApp = `export async function svcApp(app) {
  let seen = 0;
  app.addHook('onRequest', async () => { seen++; });
  app.post('/public/body', async () => ({ ok: true }));
  app.get('/public/seen', async () => ({ seen }));
}
`;
    await withOneModule('count-app', countApp, async (h) => {
      const seen = async () => ((await (await fetch(`${h.gatewayBase}/public/seen`)).json()) as { seen: number }).seen;
      const before = await seen();
      const oversized = JSON.stringify({ a: 'x'.repeat(70 * 1024) });
      for (let i = 0; i < 20; i++) {
        const res = await fetch(`${h.gatewayBase}/public/body`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: oversized,
        });
        assert.equal(res.status, 413, `try ${i + 1}`);
        assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
        assert.equal(((await res.json()) as { code: string }).code, 'payload_too_large');
      }
      // Only the counting request itself reached the module process: the 20 bodies never did.
      assert.equal(await seen(), before + 1);
      // Sent chunked, with no length to refuse it by: counted as relayed, refused at the limit.
      for (let i = 0; i < 20; i++) {
        // 256 KiB in 16 KiB chunks: the module process used to refuse it and close while these still came.
        const chunks = [Buffer.from('{"a":"'), ...Array.from({ length: 16 }, () => Buffer.alloc(16 * 1024, 'x')), Buffer.from('"}')];
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            const next = chunks.shift();
            if (next === undefined) controller.close();
            else controller.enqueue(next);
          },
        });
        const res = await fetch(`${h.gatewayBase}/public/body`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          duplex: 'half',
        } as RequestInit);
        assert.equal(res.status, 413, `chunked try ${i + 1}`);
        assert.equal(((await res.json()) as { code: string }).code, 'payload_too_large');
      }
      // A chunked body within the limit still goes through, streamed.
      const small = await fetch(`${h.gatewayBase}/public/body`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(Buffer.from('{"a":1}'));
            controller.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
      assert.equal(small.status, 200);
      assert.deepEqual(await small.json(), { ok: true });
    });
  });

  test('a wrong media type, a poisoned or oversized JSON body, an unknown path: 415, 400, 413, 404 with their codes; a module bug: 500', async () => {
    const bodyApp = `export async function svcApp(app) {
  app.post('/public/body', async (req) => ({ got: req.body }));
  app.get('/public/bug', async () => { throw new TypeError('a bug'); });
}
`;
    await withOneModule('body-app', bodyApp, async (h) => {
      const post = (body: string, type: string) =>
        fetch(`${h.gatewayBase}/public/body`, { method: 'POST', headers: { 'content-type': type }, body });
      const ok = await post('{"a":1}', 'application/json');
      assert.equal(ok.status, 200);
      assert.deepEqual(await ok.json(), { got: { a: 1 } });
      const cases: [Response, number, string][] = [
        [await post('hello', 'text/plain'), 415, 'unsupported_media_type'],
        [await post('{"__proto__":{"x":1}}', 'application/json'), 400, 'invalid_request'],
        [await post('{"a":', 'application/json'), 400, 'invalid_request'],
        [await post(JSON.stringify({ a: 'x'.repeat(70 * 1024) }), 'application/json'), 413, 'payload_too_large'],
        [await fetch(`${h.gatewayBase}/public/nothing-here`), 404, 'not_found'],
        [await fetch(`${h.gatewayBase}/public/bug`), 500, 'internal_error'],
      ];
      for (const [res, status, code] of cases) {
        assert.equal(res.status, status, `${res.url} ${code}`);
        assert.match(res.headers.get('content-type') ?? '', /^application\/problem\+json/);
        const body = (await res.json()) as { code: string; detail: string };
        assert.equal(body.code, code);
        if (status === 500) assert.doesNotMatch(body.detail, /a bug/);
      }
    });
  });
});
