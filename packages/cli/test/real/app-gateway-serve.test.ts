import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from 'node:tls';
import { bash, cleanEnv, freePort, type StartedProcess, startUntilReady, stdoutEnded, tempDir } from '../helpers.js';
// The gateways that listen are the installed `svc`, spawned (ready lines, signals, SIGHUP); `init`,
// `--help` and the refusals, which return before anything binds and whose exit code and output
// are the subject, run in process.
import { initProjectInProcess as initProject, svcInProcess as svc } from '../in-process.js';

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

/** Starts `svc <args>` and resolves once the application gateway printed its ready line. */
function startApp(args: readonly string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<StartedProcess<string>> {
  return startUntilReady(args, (out) => APP_READY.exec(out)?.[1] ?? null, { env });
}

/** `project.edn` with `keys` (EDN text) added at the top level, for the duration of `fn`. */
async function withProjectKeys<T>(dir: string, keys: string, fn: () => Promise<T>): Promise<T> {
  const file = join(dir, 'project.edn');
  const original = readFileSync(file, 'utf8');
  writeFileSync(file, original.replace(/^\{/, `{${keys}\n `));
  try {
    return await fn();
  } finally {
    writeFileSync(file, original);
  }
}

/** The SHA-256 fingerprint of the certificate a TLS server presents on `url`. */
function servedFingerprint(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      const fp = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fp);
    });
    socket.on('error', reject);
  });
}

/** A self-signed P-256 certificate for 127.0.0.1 and its key, written by `openssl req` into `dir` as `name`.crt/.key. */
async function makeCert(dir: string, name: string): Promise<{ cert: string; key: string; fingerprint: string }> {
  const r = await bash(
    `cd "$D" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=$N" -addext subjectAltName=IP:127.0.0.1 -keyout "$N.key" -out "$N.crt" 2>/dev/null && chmod 600 "$N.key"`,
    { env: cleanEnv({ D: dir, N: name }) },
  );
  assert.equal(r.code, 0, r.stderr);
  const cert = join(dir, `${name}.crt`);
  return { cert, key: join(dir, `${name}.key`), fingerprint: new X509Certificate(readFileSync(cert)).fingerprint256 };
}

async function waitFor(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('the application gateway listener: svc app serve and svc serve', () => {
  const tmp = tempDir('svc-app-serve-test-');
  const dir = join(tmp.dir, 'demo');
  before(async () => {
    await initProject(dir);
  });
  after(() => tmp.cleanup());

  test('svc app serve runs the gateway alone: ready line, reserved routes, 401 with the application realm, exit 0 on SIGTERM', async () => {
    const s = await startApp(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
    try {
      assert.match(s.stdout(), /^svc app: application gateway listening on http:\/\/127\.0\.0\.1:\d+\n$/);
      const jwks = await fetch(`${s.ready}/.svc/jwks.json`);
      assert.equal(jwks.status, 200);
      assert.ok(Array.isArray(((await jwks.json()) as { keys: unknown[] }).keys));
      const app = await fetch(`${s.ready}/anything`);
      assert.equal(app.status, 401);
      assert.match(app.headers.get('www-authenticate') ?? '', /^Bearer realm="application"/);
      // No management API and no node surface on this listener.
      assert.equal((await fetch(`${s.ready}/v1/auth/me`)).status, 401);
      assert.equal((await fetch(`${s.ready}/.svc/auth/v1/me`)).status, 401);
      assert.doesNotMatch(s.stderr(), /WARNING/);
    } finally {
      assert.equal(await s.stop('SIGTERM'), 0);
    }
  });

  test('svc serve starts the gateway after the management API and the node surface', async () => {
    const s = await startApp(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', dir]);
    try {
      const lines = s.stdout().trim().split('\n');
      assert.equal(lines.length, 3, s.stdout());
      assert.match(lines[0] ?? '', /^svc auth: management API listening on /);
      assert.match(lines[1] ?? '', /^svc node: node surface listening on /);
      assert.match(lines[2] ?? '', /^svc app: application gateway listening on http:\/\/127\.0\.0\.1:\d+$/);
    } finally {
      assert.equal(await s.stop('SIGTERM'), 0);
    }
    const help = await svc(['--help']);
    assert.match(
      help.stdout,
      /serve +Run the service in the foreground: the embedded management API, the node surface and the application gateway\./,
    );
    assert.doesNotMatch(help.stdout, /comes later/);
    assert.match(help.stdout, /app serve +Run the application gateway alone/);
  });

  test('--app-listen beats SVC_APP_LISTEN, which beats :svc/app-listen in project.edn', async () => {
    const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
    await withProjectKeys(dir, `:svc/app-listen "127.0.0.1:${p1}"`, async () => {
      const fromConfig = await startApp(['app', 'serve', dir], cleanEnv({ SVC_APP_LISTEN: undefined }));
      assert.equal(fromConfig.ready, `http://127.0.0.1:${p1}`);
      await fromConfig.stop();
      const fromEnv = await startApp(['app', 'serve', dir], cleanEnv({ SVC_APP_LISTEN: `127.0.0.1:${p2}` }));
      assert.equal(fromEnv.ready, `http://127.0.0.1:${p2}`);
      await fromEnv.stop();
      const fromFlag = await startApp(
        ['app', 'serve', '--app-listen', `127.0.0.1:${p3}`, dir],
        cleanEnv({ SVC_APP_LISTEN: `127.0.0.1:${p2}` }),
      );
      assert.equal(fromFlag.ready, `http://127.0.0.1:${p3}`);
      await fromFlag.stop();
    });
  });

  test('off from --app-listen, SVC_APP_LISTEN or :svc/app-listen disables the gateway of svc serve; svc app serve refuses it', async () => {
    const base = ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0'];
    const nodeReady = (out: string) => (/svc node: node surface listening on/.test(out) ? true : null);
    const cases: [string[], NodeJS.ProcessEnv][] = [
      [[...base, '--app-listen', 'off', dir], cleanEnv()],
      [[...base, dir], cleanEnv({ SVC_APP_LISTEN: 'off' })],
    ];
    for (const [args, env] of cases) {
      const s = await startUntilReady(args, nodeReady, { env });
      // Every surface starts before any ready line is printed, and the lines are printed in one
      // go: once the process has exited and its output ended, a gateway would have been in it.
      assert.equal(await s.stop(), 0);
      await stdoutEnded(s.child, 'svc serve');
      assert.doesNotMatch(s.stdout(), /application gateway/);
    }
    await withProjectKeys(dir, ':svc/app-listen "off"', async () => {
      const s = await startUntilReady([...base, dir], nodeReady, { env: cleanEnv({ SVC_APP_LISTEN: undefined }) });
      assert.equal(await s.stop(), 0);
      await stdoutEnded(s.child, 'svc serve');
      assert.doesNotMatch(s.stdout(), /application gateway/);
      // The flag still turns it on for one run.
      const on = await startApp([...base, '--app-listen', '127.0.0.1:0', dir], cleanEnv({ SVC_APP_LISTEN: undefined }));
      await on.stop();
      const alone = await svc(['app', 'serve', dir], { env: cleanEnv({ SVC_APP_LISTEN: undefined }) });
      assert.equal(alone.code, 1);
      assert.equal(alone.stderr.trim().split('\n').length, 1, alone.stderr);
      assert.match(alone.stderr, /svc app serve is the application gateway and cannot be turned off/);
    });
  });

  test('a malformed gateway address is refused before binding: exit 2 from --app-listen, 1 from SVC_APP_LISTEN or project.edn', async () => {
    for (const bad of ['127.1:0', ':8080', '127.0.0.1', '[::1]8080', 'bad_host:1', '127.0.0.1:70000']) {
      const r = await svc(['app', 'serve', '--app-listen', bad, dir]);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
      assert.equal(r.stdout, '');
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /--app-listen/);
    }
    const env = await svc(['app', 'serve', dir], { env: cleanEnv({ SVC_APP_LISTEN: '127.1:0' }) });
    assert.equal(env.code, 1);
    assert.match(env.stderr, /SVC_APP_LISTEN "127\.1:0" is refused/);
    await withProjectKeys(dir, ':svc/app-listen "8080"', async () => {
      const r = await svc(['app', 'serve', dir], { env: cleanEnv({ SVC_APP_LISTEN: undefined }) });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /:svc\/app-listen/);
      assert.match(r.stderr, /expected "host:port" or "off"/);
    });
  });

  test('with :svc/app-public-origin the CSRF rule trusts only that origin, and a local proxy forwarding its host gets through the DNS-rebinding guard', async () => {
    /** `curl` POSTs logout (a state-changing browser route) with `Origin` and `Host`; answers the status and the problem's code. */
    const logout = async (url: string, origin: string, host?: string) => {
      const r = await bash(
        `curl -sS -X POST -H "Origin: $O"${host === undefined ? '' : ' -H "Host: $H"'} -w '\n%{http_code}' "$URL/.svc/auth/v1/logout"`,
        { env: cleanEnv({ O: origin, H: host ?? '', URL: url }) },
      );
      assert.equal(r.code, 0, r.stderr);
      const [body = '', status = ''] = r.stdout.split('\n');
      return { status: Number(status), code: (JSON.parse(body || '{}') as { code?: string }).code };
    };
    const PUBLIC = { origin: 'https://app.example.com', host: 'app.example.com' };
    // Without the key, the gateway's origin is the Host a request names: on loopback only a
    // loopback Host and Origin get in, so a proxy on this machine forwarding the public host is refused.
    const plain = await startApp(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
    try {
      assert.notEqual((await logout(plain.ready, plain.ready)).code, 'csrf_refused');
      assert.deepEqual(await logout(plain.ready, PUBLIC.origin, PUBLIC.host), { status: 403, code: 'forbidden_host' });
    } finally {
      await plain.stop();
    }
    await withProjectKeys(dir, ':svc/app-public-origin "HTTPS://app.example.com/"', async () => {
      const s = await startApp(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
      try {
        // The public host and origin, as a local TLS-terminating proxy forwards them: accepted.
        const own = await logout(s.ready, PUBLIC.origin, PUBLIC.host);
        assert.notEqual(own.code, 'csrf_refused');
        assert.notEqual(own.code, 'forbidden_host');
        assert.ok(own.status < 500, String(own.status));
        // The Host-derived origin no longer counts as the gateway's own.
        assert.deepEqual(await logout(s.ready, s.ready), { status: 403, code: 'csrf_refused' });
        // A rebound hostile page names its own host: still stopped by the guard.
        assert.deepEqual(await logout(s.ready, 'http://evil.example', 'evil.example'), { status: 403, code: 'forbidden_host' });
        // The public host with a foreign Origin: not exempt from the guard.
        assert.deepEqual(await logout(s.ready, 'http://evil.example', PUBLIC.host), { status: 403, code: 'forbidden_host' });
      } finally {
        await s.stop();
      }
    });
    await withProjectKeys(dir, ':svc/app-public-origin "https://app.example.com/app"', async () => {
      const r = await svc(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /:svc\/app-public-origin: expected an http:\/\/ or https:\/\/ origin/);
    });
  });

  test('plain HTTP on a network address warns loudly on stderr and in the log, unless TLS or a trusted proxy terminates it', async () => {
    const exposed = await startApp(['app', 'serve', '--app-listen', '0.0.0.0:0', dir]);
    try {
      await waitFor('the warning', () => /app_gateway_cleartext/.test(exposed.stderr()));
      assert.match(exposed.stderr(), /^svc: WARNING: the application gateway listens on a network address over plain HTTP/m);
      const logLine = exposed
        .stderr()
        .split('\n')
        .find((l) => l.includes('"app_gateway_cleartext"'));
      assert.equal(JSON.parse(logLine ?? '{}').level, 40);
    } finally {
      await exposed.stop();
    }
    const loopback = await startApp(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
    await loopback.stop();
    assert.doesNotMatch(loopback.stderr(), /WARNING|app_gateway_cleartext/);
    await withProjectKeys(dir, ':svc/app-trusted-proxies ["10.0.0.5"]', async () => {
      const proxied = await startApp(['app', 'serve', '--app-listen', '0.0.0.0:0', dir]);
      await proxied.stop();
      assert.doesNotMatch(proxied.stderr(), /WARNING|app_gateway_cleartext/);
    });
  });
});

describe('built-in TLS of the application gateway (:svc/app-tls), reloaded on SIGHUP', () => {
  const tmp = tempDir('svc-app-tls-test-');
  const dir = join(tmp.dir, 'demo');
  before(async () => {
    await initProject(dir);
  });
  after(() => tmp.cleanup());

  test('serves the configured certificate over https, swaps in a new pair on SIGHUP, and keeps it when the next pair is bad', async () => {
    const first = await makeCert(tmp.dir, 'first');
    const second = await makeCert(tmp.dir, 'second');
    const live = { cert: join(tmp.dir, 'live.crt'), key: join(tmp.dir, 'live.key') };
    writeFileSync(live.cert, readFileSync(first.cert));
    writeFileSync(live.key, readFileSync(first.key), { mode: 0o600 });
    // A relative path is from the project directory.
    await withProjectKeys(dir, ':svc/app-tls {:cert "../live.crt" :key "../live.key"}', async () => {
      const s = await startApp(['app', 'serve', '--app-listen', '0.0.0.0:0', dir]);
      try {
        assert.match(s.ready, /^https:\/\/0\.0\.0\.0:\d+$/);
        // TLS on a network address: no cleartext warning.
        assert.doesNotMatch(s.stderr(), /WARNING|app_gateway_cleartext/);
        const url = `https://127.0.0.1:${new URL(s.ready).port}`;
        assert.equal(await servedFingerprint(url), first.fingerprint);
        // A standard client verifies it against the certificate, and the gateway answers.
        const curl = await bash(`curl -sS --cacert "$CA" -o /dev/null -w '%{http_code}' "$URL/.svc/jwks.json"`, {
          env: cleanEnv({ CA: first.cert, URL: url }),
        });
        assert.equal(curl.stdout, '200', curl.stderr);
        const plain = await bash(`curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/.svc/jwks.json" || true`, {
          env: cleanEnv({ P: new URL(url).port }),
        });
        assert.notEqual(plain.stdout, '200', 'plain HTTP is not answered on the TLS listener');

        // Rotate: new files in place, then SIGHUP.
        writeFileSync(live.cert, readFileSync(second.cert));
        writeFileSync(live.key, readFileSync(second.key));
        s.child.kill('SIGHUP');
        await waitFor('the reload', () => /"app\.tls_reloaded"/.test(s.stderr()));
        assert.equal(await servedFingerprint(url), second.fingerprint);
        assert.match(s.stderr(), new RegExp(`"cert_sha256":"${second.fingerprint}"`));

        // A bad pair (the first certificate with the second key): logged, the second pair stays.
        writeFileSync(live.cert, readFileSync(first.cert));
        s.child.kill('SIGHUP');
        await waitFor('the refused reload', () => /"app\.tls_reload_failed"/.test(s.stderr()));
        assert.equal(await servedFingerprint(url), second.fingerprint);
        // Garbage: the same.
        writeFileSync(live.cert, 'not a certificate');
        s.child.kill('SIGHUP');
        await waitFor('the second refused reload', () => (s.stderr().match(/"app\.tls_reload_failed"/g) ?? []).length >= 2);
        assert.equal(await servedFingerprint(url), second.fingerprint);
        assert.equal(s.child.exitCode, null, 'still running after SIGHUP');
        assert.doesNotMatch(s.stderr(), /BEGIN (EC )?PRIVATE KEY/);
      } finally {
        assert.equal(await s.stop('SIGTERM'), 0);
      }
    });
  });

  test('a missing or mismatched TLS pair is refused at start with one line naming the file', async () => {
    const a = await makeCert(tmp.dir, 'a');
    const b = await makeCert(tmp.dir, 'b');
    await withProjectKeys(dir, `:svc/app-tls {:cert "${a.cert}" :key "${join(tmp.dir, 'missing.key')}"}`, async () => {
      const r = await svc(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /cannot read the private key .*missing\.key of :svc\/app-tls/);
    });
    await withProjectKeys(dir, `:svc/app-tls {:cert "${a.cert}" :key "${b.key}"}`, async () => {
      const r = await svc(['app', 'serve', '--app-listen', '127.0.0.1:0', dir]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /:svc\/app-tls/);
    });
  });
});
