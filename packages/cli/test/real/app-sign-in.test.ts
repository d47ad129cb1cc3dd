import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bash, cleanEnv, type StartedProcess, SVC_BIN, startUntilReady, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import {
  enrolledProjectInProcess as enrolledProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

// biome-ignore lint/suspicious/noExplicitAny: CLI JSON output is inspected field by field
type Json = any;

const READY = {
  management: /svc auth: management API listening on (http:\/\/\S+)\n/,
  node: /svc node: node surface listening on (http:\/\/\S+)\n/,
  app: /svc app: application gateway listening on (http:\/\/\S+)\n/,
};

describe('application-realm sign-in on the gateway, through the real svc CLI and through curl + openssl', () => {
  const tmp = tempDir('svc-app-sign-in-test-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const appCreds = join(tmp.dir, 'device-home', 'app-credentials.json');
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: appCreds });
  let server: StartedProcess<{ management: string; node: string; app: string }>;
  let adminKey: string;
  let nodeId: string;

  /** Pairs `keyFile` (an Ed25519 PKCS#8 PEM) as an application device; returns the paired device. */
  async function pairApplicationDevice(keyFile: string, pub: string, name: string): Promise<Json> {
    const prepared = JSON.parse(
      (
        await svcOk(
          ['auth', 'pair', '--node-url', server.ready.node, '--realm', 'application', '--device-key', pub, '--name', name, '--json'],
          {
            env: adminEnv,
          },
        )
      ).stdout,
    );
    assert.equal(prepared.realm, 'application');
    const done = JSON.parse(
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
    assert.equal(done.device.realm, 'application');
    return done.device;
  }

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    adminKey = p.keyFile;
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', '127.0.0.1:0', p.dir],
      (out) => {
        const [m, n, a] = [READY.management.exec(out), READY.node.exec(out), READY.app.exec(out)];
        return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
      },
      { env: adminEnv },
    );
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
    nodeId = ((await (await fetch(`${server.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('svc auth login --realm application signs a paired application device in; whoami, refresh and logout work against the gateway', async () => {
    const keyFile = join(tmp.dir, 'app-device.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const device = await pairApplicationDevice(keyFile, pub, 'kiosk');

    const login = JSON.parse(
      (await svcOk(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', keyFile, '--json'], { env: deviceEnv }))
        .stdout,
    );
    assert.equal(login.realm, 'application');
    assert.equal(login.credentials, appCreds);
    const saved = currentCredentials(appCreds);
    assert.equal(saved.realm, 'application');
    assert.equal(saved.url, server.ready.app);

    const me = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: deviceEnv })).stdout);
    assert.equal(me.realm, 'application');
    assert.equal(me.device, device.id);
    assert.equal(me.subject, device.subject);

    // The application token opens the application (404: nothing attached, but past authentication) ...
    const appToken = currentCredentials(appCreds).access_token as string;
    const through = await fetch(`${server.ready.app}/dashboard`, { headers: { authorization: `Bearer ${appToken}` } });
    assert.equal(through.status, 404);
    // ... and no management route; the management token opens nothing on the gateway.
    const onManagement = await fetch(`${server.ready.management}/v1/auth/me`, { headers: { authorization: `Bearer ${appToken}` } });
    assert.equal(onManagement.status, 401);
    const adminToken = currentCredentials(join(tmp.dir, 'admin-home', 'credentials.json')).access_token as string;
    for (const path of ['/dashboard', '/.svc/auth/v1/me']) {
      const r = await fetch(`${server.ready.app}${path}`, { headers: { authorization: `Bearer ${adminToken}` } });
      assert.equal(r.status, 401, path);
      assert.match(r.headers.get('www-authenticate') ?? '', /realm="application"/);
    }
    // Management commands refuse application credentials with one clear line.
    const devices = await svc(['auth', 'devices'], { env: deviceEnv });
    assert.equal(devices.code, 1);
    assert.match(devices.stderr, /application realm/);

    const refreshed = JSON.parse((await svcOk(['auth', 'refresh', '--json'], { env: deviceEnv })).stdout);
    assert.equal(refreshed.session_id, login.session_id);
    const rotated = currentCredentials(appCreds).access_token as string;
    assert.notEqual(rotated, appToken);

    const out = JSON.parse((await svcOk(['auth', 'logout', '--json'], { env: deviceEnv })).stdout);
    assert.deepEqual(out, { session_id: login.session_id, revoked: true, already_ended: false });
    const after = await fetch(`${server.ready.app}/.svc/auth/v1/me`, { headers: { authorization: `Bearer ${rotated}` } });
    assert.equal(after.status, 401);
    const whoami = await svc(['auth', 'whoami'], { env: deviceEnv });
    assert.equal(whoami.code, 1);
    assert.match(whoami.stderr, /not signed in/);
  });

  test('a management device key cannot sign in on the gateway (invalid_signature), and --realm takes only the two realms', async () => {
    const r = await svc(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', adminKey], {
      env: cleanEnv({ HOME: join(tmp.dir, 'other-home') }),
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /invalid_signature/);
    const bogus = await svc(['auth', 'login', '--realm', 'admin', '--key', adminKey]);
    assert.equal(bogus.code, 2);
  });

  test('svc auth login --realm application to a network http:// URL sends nothing: the token pair would come back in clear text', async (t) => {
    const net = Object.values(networkInterfaces())
      .flat()
      .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal);
    if (net === undefined) return t.skip('this machine has no non-loopback IPv4 address');
    let connections = 0;
    const fake = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => fake.listen(0, net.address, resolve));
    try {
      const port = (fake.address() as AddressInfo).port;
      const keyFile = join(tmp.dir, 'nosend.pem');
      await keygen(keyFile, { env: deviceEnv });
      const r = await svc(['auth', 'login', '--realm', 'application', '--url', `http://${net.address}:${port}`, '--key', keyFile], {
        env: deviceEnv,
      });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /insecure_bearer_url/);
      assert.equal(connections, 0);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });

  test('an openssl genpkey key, paired as an application device, signs in on /.svc/auth/v1 with curl and pkeyutl -rawin', async () => {
    const work = join(tmp.dir, 'openssl');
    const made = await bash(
      `mkdir -p "$W" && cd "$W" && openssl genpkey -algorithm ed25519 -out device.pem 2>/dev/null && chmod 600 device.pem && openssl pkey -in device.pem -pubout -outform DER | tail -c 32 | xxd -p -c 64`,
      { env: cleanEnv({ W: work }) },
    );
    assert.equal(made.code, 0, made.stderr);
    const pub = made.stdout.trim();
    const device = await pairApplicationDevice(join(work, 'device.pem'), pub, 'openssl');
    const script = `
      cd "$WORK"
      j() { "$NODE" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s)[process.argv[1]];process.stdout.write(typeof v==="string"?v:JSON.stringify(v))})' "$1"; }
      chl=$(curl -sS -X POST "$APP/.svc/auth/v1/challenges" -H 'content-type: application/json' -d "{\\"public_key\\":\\"$PUB\\"}")
      challenge=$(echo "$chl" | j challenge)
      challenge_id=$(echo "$chl" | j challenge_id)
      echo "challenge=$challenge"
      # OpenSSL 3.0 cannot one-shot sign from a pipe: the same bytes from a file.
      sig=$(printf %s "$challenge" | openssl pkeyutl -sign -rawin -inkey device.pem 2>/dev/null | xxd -p -c 256) || true
      if [ \${#sig} -ne 128 ]; then
        printf %s "$challenge" > challenge.txt
        sig=$(openssl pkeyutl -sign -rawin -inkey device.pem -in challenge.txt | xxd -p -c 256)
      fi
      pair=$(curl -sS -X POST "$APP/.svc/auth/v1/sessions" -H 'content-type: application/json' \\
        -d "{\\"challenge_id\\":\\"$challenge_id\\",\\"signature\\":\\"$sig\\"}")
      echo "pair_realm=$(echo "$pair" | j realm)"
      access=$(echo "$pair" | j access_token)
      refresh=$(echo "$pair" | j refresh_token)
      echo "me_status=$(curl -sS -o me.json -w '%{http_code}' "$APP/.svc/auth/v1/me" -H "authorization: Bearer $access")"
      echo "me_realm=$(j realm < me.json)"
      echo "me_device=$(j device < me.json)"
      echo "app_status=$(curl -sS -o /dev/null -w '%{http_code}' "$APP/reports" -H "authorization: Bearer $access")"
      echo "mgmt_status=$(curl -sS -o /dev/null -w '%{http_code}' "$MGMT/v1/auth/me" -H "authorization: Bearer $access")"
      # A DPoP proof (RFC 9449) by the device key, with openssl alone: the session is bound to it.
      b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
      jwk_x=$(openssl pkey -in device.pem -pubout -outform DER | tail -c 32 | b64url)
      dpop() {
        h=$(printf '{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"%s"}}' "$jwk_x" | b64url)
        p=$(printf '{"htm":"%s","htu":"%s","iat":%s,"jti":"%s"}' "$1" "$2" "$(date +%s)" "$(openssl rand -hex 16)" | b64url)
        printf %s "$h.$p" > dpop-input.txt
        printf %s "$h.$p.$(openssl pkeyutl -sign -rawin -inkey device.pem -in dpop-input.txt | b64url)"
      }
      pair2=$(curl -sS -X POST "$APP/.svc/auth/v1/refresh" -H 'content-type: application/json' -H "DPoP: $(dpop POST "$APP/.svc/auth/v1/refresh")" -d "{\\"refresh_token\\":\\"$refresh\\"}")
      access2=$(echo "$pair2" | j access_token)
      echo "mgmt_refresh=$(curl -sS -X POST "$MGMT/v1/auth/refresh" -H 'content-type: application/json' -d "{\\"refresh_token\\":\\"$(echo "$pair2" | j refresh_token)\\"}" | j code)"
      echo "old_access_status=$(curl -sS -o /dev/null -w '%{http_code}' "$APP/.svc/auth/v1/me" -H "authorization: Bearer $access")"
      echo "new_access_status=$(curl -sS -o /dev/null -w '%{http_code}' "$APP/.svc/auth/v1/me" -H "authorization: Bearer $access2")"
      echo "revoke_status=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$APP/.svc/auth/v1/revoke" -H "authorization: Bearer $access2" -H 'content-type: application/json' -d '{}')"
      echo "after_revoke=$(curl -sS "$APP/.svc/auth/v1/me" -H "authorization: Bearer $access2" | j code)"
      echo "app_after_revoke=$(curl -sS -o /dev/null -w '%{http_code}' "$APP/reports" -H "authorization: Bearer $access2")"
    `;
    const r = await bash(script, {
      env: cleanEnv({ WORK: work, APP: server.ready.app, MGMT: server.ready.management, PUB: pub, NODE: process.execPath, SVC: SVC_BIN }),
    });
    assert.equal(r.code, 0, r.stderr);
    const out = Object.fromEntries(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    assert.match(out.challenge ?? '', /^svc-auth-v1 challenge \S+ application chl_/);
    assert.equal(out.pair_realm, 'application');
    assert.equal(out.me_status, '200');
    assert.equal(out.me_realm, 'application');
    assert.equal(out.me_device, device.id);
    assert.equal(out.app_status, '404');
    assert.equal(out.mgmt_status, '401');
    assert.equal(out.mgmt_refresh, 'invalid_refresh_token');
    assert.equal(out.old_access_status, '401');
    assert.equal(out.new_access_status, '200');
    assert.equal(out.revoke_status, '200');
    assert.equal(out.after_revoke, 'invalid_token');
    assert.equal(out.app_after_revoke, '401');
  });
});
