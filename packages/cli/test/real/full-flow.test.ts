import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { bash, cleanEnv, type ServerProcess, SVC_BIN, startServer, tempDir } from '../helpers.js';
// The flow is the subject: the service (`auth serve`) is the installed `svc`, spawned, and so is
// the `svc auth pubkey` the outside client's script runs; the operator's commands run `main` in
// process (svcInProcess), the same CLI without a Node start each.
import { initProjectInProcess as initProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { currentCredentials, writeCurrentCredentials } from '../support/credentials-file.js';

describe('the bootstrap → enroll → challenge → session → me → refresh → revoke flow through the real svc CLI', () => {
  const tmp = tempDir();
  const dir = join(tmp.dir, 'demo');
  const creds = join(tmp.dir, 'home', 'creds', 'credentials.json');
  const env = cleanEnv({ HOME: join(tmp.dir, 'home'), SVC_CREDENTIALS: creds });
  let server: ServerProcess | undefined;

  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('init, keygen, enroll, serve, login, whoami, refresh, logout all succeed in order', async () => {
    const init = await initProject(dir, { env });
    assert.deepEqual(Object.keys(init).sort(), ['bootstrap_token', 'control_db', 'expires_at', 'project']);
    assert.match(init.bootstrap_token, /^svcb_[A-Za-z0-9_-]{43}$/);

    const keyFile = join(tmp.dir, 'device.pem');
    const pub = (await svcOk(['auth', 'keygen', '--out', keyFile], { env })).stdout.trim();
    assert.match(pub, /^[0-9a-f]{64}$/);
    assert.equal((await svcOk(['auth', 'pubkey', '--key', keyFile], { env })).stdout.trim(), pub);

    const enrolled = JSON.parse(
      (await svcOk(['auth', 'enroll', init.bootstrap_token, pub, dir, '--name', 'laptop', '--json'], { env })).stdout,
    );
    assert.equal(enrolled.device.public_key, pub);
    assert.equal(enrolled.device.realm, 'management');
    assert.equal(enrolled.device.name, 'laptop');

    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir], { env });
    await svcOk(['auth', 'login', '--key', keyFile, '--url', server.url], { env });
    const saved = currentCredentials(creds);
    assert.match(saved.access_token, /^svca_/);

    const me = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout);
    assert.equal(me.realm, 'management');
    assert.equal(me.device, enrolled.device.id);
    assert.equal(me.subject, enrolled.device.subject);
    assert.equal(me.session, saved.session_id);

    await svcOk(['auth', 'refresh'], { env });
    const rotated = currentCredentials(creds);
    assert.equal(rotated.session_id, saved.session_id);
    assert.notEqual(rotated.refresh_token, saved.refresh_token);
    assert.notEqual(rotated.access_token, saved.access_token);
    // The retired access token is refused at once.
    const old = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${saved.access_token}` } });
    assert.equal(old.status, 401);

    await svcOk(['auth', 'logout'], { env });
    assert.throws(() => readFileSync(creds), { code: 'ENOENT' });
    const afterLogout = await fetch(`${server.url}/v1/auth/me`, { headers: { authorization: `Bearer ${rotated.access_token}` } });
    assert.equal(afterLogout.status, 401);
    assert.equal(((await afterLogout.json()) as { code: string }).code, 'invalid_token');

    // whoami without credentials is a failure (exit 1), not a crash.
    assert.equal((await svc(['auth', 'whoami'], { env })).code, 1);
  });

  test('whoami refreshes an expired access token automatically and saves the rotated pair', async () => {
    assert.ok(server);
    await svcOk(['auth', 'login', '--key', join(tmp.dir, 'device.pem'), '--url', server.url], { env });
    const saved = currentCredentials(creds);
    writeCurrentCredentials(creds, { ...saved, access_expires_at: new Date(Date.now() - 60_000).toISOString() });
    await svcOk(['auth', 'whoami'], { env });
    const now = currentCredentials(creds);
    assert.notEqual(now.refresh_token, saved.refresh_token);
    assert.equal(now.session_id, saved.session_id);
  });

  test('whoami refreshes and retries once when the server refuses the access token', async () => {
    const saved = currentCredentials(creds);
    writeCurrentCredentials(creds, { ...saved, access_token: `svca_${'0'.repeat(26)}${'A'.repeat(43)}` });
    const me = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout);
    assert.equal(me.session, saved.session_id);
    assert.notEqual(currentCredentials(creds).refresh_token, saved.refresh_token);
  });
});

describe('the same flow driven by curl, openssl and xxd, as an outside client would', () => {
  const tmp = tempDir();
  const dir = join(tmp.dir, 'demo');
  let server: ServerProcess | undefined;

  before(async () => {
    await initProject(dir);
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('an openssl genpkey key enrolls over the API, signs the challenge with pkeyutl -rawin and gets, rotates and revokes a session', async () => {
    // A fresh token: the one from before() is superseded, which also proves supersession works for the API.
    const init = await initProject(dir);
    server = await startServer(['auth', 'serve', '--listen', '127.0.0.1:0', dir]);
    const script = `
      cd "$WORK"
      openssl genpkey -algorithm ed25519 -out device.pem 2>/dev/null
      pub=$(openssl pkey -in device.pem -pubout -outform DER | tail -c 32 | xxd -p -c 64)
      j() { "$NODE" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s)[process.argv[1]];process.stdout.write(typeof v==="string"?v:JSON.stringify(v))})' "$1"; }
      enroll=$(curl -sS -X POST "$URL/v1/auth/enroll" -H 'content-type: application/json' \\
        -d "{\\"bootstrap_token\\":\\"$BOOT\\",\\"public_key\\":\\"$pub\\",\\"name\\":\\"openssl\\"}" -w '\\n%{http_code}')
      echo "enroll_status=$(echo "$enroll" | tail -n1)"
      chl=$(curl -sS -X POST "$URL/v1/auth/challenges" -H 'content-type: application/json' -d "{\\"public_key\\":\\"$pub\\"}")
      challenge=$(echo "$chl" | j challenge)
      challenge_id=$(echo "$chl" | j challenge_id)
      # The contract's pipe form needs OpenSSL >= 3.2; 3.0 cannot one-shot sign from a pipe
      # ("unable to determine file size"), so fall back to the same bytes from a file.
      sig=$(printf %s "$challenge" | openssl pkeyutl -sign -rawin -inkey device.pem 2>/dev/null | xxd -p -c 256) || true
      if [ \${#sig} -ne 128 ]; then
        printf %s "$challenge" > challenge.txt
        sig=$(openssl pkeyutl -sign -rawin -inkey device.pem -in challenge.txt | xxd -p -c 256)
      fi
      pair=$(curl -sS -X POST "$URL/v1/auth/sessions" -H 'content-type: application/json' \\
        -d "{\\"challenge_id\\":\\"$challenge_id\\",\\"signature\\":\\"$sig\\"}")
      access=$(echo "$pair" | j access_token)
      refresh=$(echo "$pair" | j refresh_token)
      echo "me_status=$(curl -sS -o me.json -w '%{http_code}' "$URL/v1/auth/me" -H "authorization: Bearer $access")"
      echo "me_realm=$(j realm < me.json)"
      # A DPoP proof (RFC 9449) by the device key, with openssl alone: the session is bound to it.
      b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
      jwk_x=$(openssl pkey -in device.pem -pubout -outform DER | tail -c 32 | b64url)
      dpop() {
        h=$(printf '{"typ":"dpop+jwt","alg":"EdDSA","jwk":{"kty":"OKP","crv":"Ed25519","x":"%s"}}' "$jwk_x" | b64url)
        p=$(printf '{"htm":"%s","htu":"%s","iat":%s,"jti":"%s"}' "$1" "$2" "$(date +%s)" "$(openssl rand -hex 16)" | b64url)
        printf %s "$h.$p" > dpop-input.txt
        printf %s "$h.$p.$(openssl pkeyutl -sign -rawin -inkey device.pem -in dpop-input.txt | b64url)"
      }
      echo "bare_refresh=$(curl -sS -X POST "$URL/v1/auth/refresh" -H 'content-type: application/json' -d "{\\"refresh_token\\":\\"$refresh\\"}" | j code)"
      pair2=$(curl -sS -X POST "$URL/v1/auth/refresh" -H 'content-type: application/json' -H "DPoP: $(dpop POST "$URL/v1/auth/refresh")" -d "{\\"refresh_token\\":\\"$refresh\\"}")
      access2=$(echo "$pair2" | j access_token)
      echo "old_access_status=$(curl -sS -o /dev/null -w '%{http_code}' "$URL/v1/auth/me" -H "authorization: Bearer $access")"
      echo "new_access_status=$(curl -sS -o /dev/null -w '%{http_code}' "$URL/v1/auth/me" -H "authorization: Bearer $access2")"
      echo "revoke_status=$(curl -sS -o /dev/null -w '%{http_code}' -X POST "$URL/v1/auth/revoke" -H "authorization: Bearer $access2" -H 'content-type: application/json' -d '{}')"
      echo "after_revoke=$(curl -sS "$URL/v1/auth/me" -H "authorization: Bearer $access2" | j code)"
      echo "cli_pub_matches=$([ "$("$NODE" "$SVC" auth pubkey --key device.pem)" = "$pub" ] && echo yes || echo no)"
    `;
    const r = await bash(script, {
      env: cleanEnv({ WORK: tmp.dir, URL: server.url, BOOT: init.bootstrap_token, SVC: SVC_BIN, NODE: process.execPath }),
    });
    assert.equal(r.code, 0, r.stderr);
    const out = Object.fromEntries(
      r.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('=') as [string, string]),
    );
    assert.equal(out.enroll_status, '201');
    assert.equal(out.me_status, '200');
    assert.equal(out.me_realm, 'management');
    assert.equal(out.bare_refresh, 'invalid_dpop_proof', 'the session is bound to the device key: a refresh needs its proof');
    assert.equal(out.old_access_status, '401');
    assert.equal(out.new_access_status, '200');
    assert.equal(out.revoke_status, '200');
    assert.equal(out.after_revoke, 'invalid_token');
    assert.equal(out.cli_pub_matches, 'yes');
  });
});
