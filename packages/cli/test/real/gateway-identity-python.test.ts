// Who the caller is, end to end (#27 parts 4 and 5): an operator sets a user's name, email and
// groups through the management API of the real `svc serve` (SQLite store); the application gateway
// hands them to a PYTHON upstream (the standard library's http.server, verifying Svc-Assertion
// with PyJWT against the gateway's /.svc/jwks.json: packages/server/test/support/assertion-upstream.py,
// the example docs/assertion.md shows). A non-ASCII name and an email at an internationalised
// domain arrive intact and decodable; :svc/app-require :groups and :email-domains guard paths
// before the application is reached; a group name the header could not carry is refused at input.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, freePort, type StartedProcess, startUntilReady, tempDir, withTimeout } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands run in process.
import { enrolledProjectInProcess as enrolledProject, keygenInProcess as keygen, svcOkInProcess as svcOk } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are inspected field by field
type Json = any;

// Debian's interpreter on purpose: `python3` on PATH may be another one without python3-jwt.
const PYTHON = '/usr/bin/python3';
const UPSTREAM = fileURLToPath(new URL('../../../server/test/support/assertion-upstream.py', import.meta.url));
const AUDIENCE = 'svc-identity-test-app';
const NAME = 'Zoë Ångström 山田';

const READY = {
  management: /svc auth: management API listening on (http:\/\/\S+)\n/,
  node: /svc node: node surface listening on (http:\/\/\S+)\n/,
  app: /svc app: application gateway listening on (http:\/\/\S+)\n/,
};

describe('who the caller is reaches a Python upstream through svc serve, and :groups / :email-domains guard paths', () => {
  const tmp = tempDir('svc-identity-python-test-');
  const adminHome = join(tmp.dir, 'admin-home');
  const adminEnv = cleanEnv({ HOME: adminHome, SVC_CREDENTIALS: join(adminHome, 'credentials.json') });
  const appCreds = join(tmp.dir, 'device-home', 'app-credentials.json');
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: appCreds });
  let server: StartedProcess<{ management: string; node: string; app: string }>;
  let python: ChildProcess;
  let pythonOut = '';
  let subject: string;
  let appToken: string;

  const adminToken = () => currentCredentials(join(adminHome, 'credentials.json')).access_token as string;
  /** `PATCH /v1/auth/users/<subject>` on the management API, as an operator. */
  async function patchUser(body: Json): Promise<{ status: number; body: Json }> {
    const res = await fetch(`${server.ready.management}/v1/auth/users/${subject}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminToken()}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  /** A request to the application through the gateway, with the application device's bearer. */
  async function viaGateway(path: string): Promise<{ status: number; body: Json }> {
    const res = await fetch(`${server.ready.app}${path}`, { headers: { authorization: `Bearer ${appToken}` } });
    return { status: res.status, body: await res.json() };
  }

  before(async () => {
    const check = spawnSync(PYTHON, ['-c', 'import jwt, cryptography']);
    assert.equal(check.status, 0, `${PYTHON} needs python3-jwt and python3-cryptography`);
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    const gatewayPort = await freePort();
    const gateway = `http://127.0.0.1:${gatewayPort}`;
    // The application first: the gateway's address is chosen now, its JWK Set fetched at the first request.
    python = spawn(PYTHON, [UPSTREAM, `${gateway}/.svc/jwks.json`, AUDIENCE, gateway], { stdio: ['ignore', 'pipe', 'pipe'] });
    python.stderr?.setEncoding('utf8').on('data', (d: string) => {
      pythonOut += d;
    });
    const upstreamPort = await withTimeout(
      new Promise<string>((resolve, reject) => {
        python.stdout?.setEncoding('utf8').on('data', (d: string) => {
          pythonOut += d;
          const m = /listening (\d+)/.exec(pythonOut);
          if (m) resolve(m[1] as string);
        });
        python.on('exit', (code) => reject(new Error(`the Python upstream exited (${code}): ${pythonOut}`)));
      }),
      'the Python upstream to print its port',
      20_000,
    );
    const edn = join(p.dir, 'project.edn');
    writeFileSync(
      edn,
      readFileSync(edn, 'utf8').replace(
        /^\{/,
        `{:svc/app-upstream "http://127.0.0.1:${upstreamPort}"
 :svc/app-audience "${AUDIENCE}"
 :svc/app-require {"/ops/*" {:groups ["ops" "admins"]}
                   "/staff/*" {:email-domains ["bücher.example"]}
                   "/both/*" {:groups ["ops"] :email-domains ["example.com"]}}
 `,
      ),
    );
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${gatewayPort}`, p.dir],
      (out) => {
        const [m, n, a] = [READY.management.exec(out), READY.node.exec(out), READY.app.exec(out)];
        return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
      },
      { env: adminEnv },
    );
    assert.equal(server.ready.app, gateway);
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    const nodeId = ((await (await fetch(`${server.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;

    // An application device, paired by the operator and signed in at the gateway.
    const keyFile = join(tmp.dir, 'app-device.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const prepared = JSON.parse(
      (
        await svcOk(
          ['auth', 'pair', '--node-url', server.ready.node, '--realm', 'application', '--device-key', pub, '--name', 'zoe', '--json'],
          {
            env: adminEnv,
          },
        )
      ).stdout,
    );
    const paired = JSON.parse(
      (
        await svcOk(
          [
            'auth',
            'pair',
            'complete',
            '--node-url',
            server.ready.node,
            '--node-id',
            nodeId,
            '--intent',
            prepared.intent_id,
            '--code',
            prepared.code,
            '--key',
            keyFile,
            '--json',
          ],
          { env: deviceEnv },
        )
      ).stdout,
    );
    subject = paired.device.subject;
    await svcOk(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', keyFile, '--json'], { env: deviceEnv });
    appToken = currentCredentials(appCreds).access_token as string;
  });
  after(async () => {
    python?.kill();
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('before any attribute is set: only the subject, no Svc-Email, Svc-Name, Svc-Groups or identity claims', async () => {
    const r = await viaGateway('/whoami');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { sub: subject, headers: {} });
  });

  test('a non-ASCII name and an email at an internationalised domain reach Python intact: verified claims and decoded headers agree', async () => {
    const set = await patchUser({ name: NAME, email: 'user@bücher.example', email_verified: true, groups: ['ops', 'admins'] });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.equal(set.body.user.email, 'user@xn--bcher-kva.example', 'kept in its A-label form');
    const r = await viaGateway('/whoami');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const who = { email: 'user@xn--bcher-kva.example', name: NAME, groups: ['admins', 'ops'] };
    // The assertion, verified by PyJWT against the gateway's JWK Set, and the plain headers
    // (Svc-Name through urllib.parse.unquote, Svc-Groups split at commas) say the same.
    assert.deepEqual(r.body, { sub: subject, ...who, email_verified: true, headers: who });
    assert.match(
      pythonOut,
      new RegExp(`verified ${subject}: email=user@xn--bcher-kva\\.example name=${NAME} groups=\\['admins', 'ops'\\]`),
    );
  });

  test(':groups and :email-domains: a member of a listed group passes; a verified email at the domain passes, an unverified one is refused before Python', async () => {
    assert.equal((await viaGateway('/ops/deploy')).status, 200);
    assert.equal((await viaGateway('/staff/handbook')).status, 200, 'bücher.example in project.edn matches the A-label email');
    assert.equal((await patchUser({ email_verified: false })).status, 200);
    const before = pythonOut.length;
    const refused = await viaGateway('/staff/handbook');
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'insufficient_claims');
    assert.equal(pythonOut.slice(before), '', 'the application was never reached');
    const both = await viaGateway('/both/x');
    assert.equal(both.status, 403, 'in ops, but no verified email at example.com: every key must hold');
    assert.equal((await patchUser({ email: 'ada@example.com', email_verified: true })).status, 200);
    assert.equal((await viaGateway('/both/x')).status, 200);
    assert.equal((await patchUser({ groups: ['dev'] })).status, 200);
    assert.equal((await viaGateway('/ops/deploy')).status, 403, 'out of ops and admins: refused at the next request');
  });

  test('a group name the Svc-Groups header could not carry is refused at input (400), and nothing changes', async () => {
    for (const bad of ['Tour Guides', 'ops,admins', 'Ops', '-ops', 'grüppe']) {
      const r = await patchUser({ groups: ['ops', bad] });
      assert.equal(r.status, 400, `${bad}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, 'invalid_request', bad);
    }
    const r = await viaGateway('/whoami');
    assert.deepEqual(r.body.groups, ['dev'], 'the last good groups stand');
    assert.equal(r.body.headers.groups.join(','), 'dev');
  });
});
