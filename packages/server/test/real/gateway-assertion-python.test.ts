import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type AssertionKeySetJson, type FreshAssertionKey, firstAssertionKeySet, makePrincipal } from '@svc/core';
import { createAssertionSigner, svcIdentityHeaders } from '@svc/server';

// Debian's interpreter on purpose: `python3` on PATH may be another one without python3-jwt.
const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../support/assertion-upstream.py', import.meta.url));
const AUD = 'http://127.0.0.1:3000';
const PUBLIC_ORIGIN = 'https://app.example';

const freshKey = (): FreshAssertionKey => {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
};
const principal = makePrincipal({
  subject: 'dev_alice',
  realm: 'application',
  session: 'ses_alice',
  device: 'dev_alice',
  claims: { amr: ['device_key'], auth_time: '2026-11-23T11:59:00.000Z', exp: '2026-12-23T11:59:00.000Z' },
});
const request = (path: string, method = 'GET') => ({ method, protocol: 'https', host: 'app.example', url: path });

describe('a Python upstream verifies Svc-Assertion with PyJWT against the served JWK Set', () => {
  const set: AssertionKeySetJson = firstAssertionKeySet(freshKey(), Date.now() - 3600_000);
  const signer = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: AUD, clock: { now: Date.now } });
  let jwksServer: Server;
  let python: ChildProcess;
  let upstream = '';
  let stderr = '';

  before(async () => {
    const check = spawnSync(PYTHON, ['-c', 'import jwt, cryptography']);
    assert.equal(
      check.status,
      0,
      `${PYTHON} needs python3-jwt and python3-cryptography (apt-get install python3-jwt python3-cryptography)`,
    );
    // The JWK Set over real HTTP, as the gateway's GET /.svc/jwks.json serves it.
    jwksServer = createServer((req, res) => {
      if (req.url !== '/.svc/jwks.json') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify(signer.jwks()));
    });
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
    const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.svc/jwks.json`;
    python = spawn(PYTHON, [SCRIPT, jwksUrl, AUD, PUBLIC_ORIGIN], { stdio: ['ignore', 'pipe', 'pipe'] });
    python.stderr?.on('data', (d) => {
      stderr += String(d);
    });
    upstream = await new Promise<string>((resolve, reject) => {
      let out = '';
      python.stdout?.on('data', (d) => {
        out += String(d);
        const m = /listening (\d+)/.exec(out);
        if (m) resolve(`http://127.0.0.1:${m[1]}`);
      });
      python.on('exit', (code) => reject(new Error(`the Python upstream exited (${code}): ${stderr}`)));
    });
  });
  after(() => {
    python?.kill();
    jwksServer?.close();
  });

  async function send(
    path: string,
    assertion: string,
    method = 'GET',
    headers: Record<string, string> = {},
    // biome-ignore lint/suspicious/noExplicitAny: the Python answer is inspected field by field
  ): Promise<{ status: number; body: any }> {
    const res = await fetch(`${upstream}${path}`, { method, headers: { ...headers, 'svc-assertion': assertion } });
    return { status: res.status, body: await res.json() };
  }
  async function refused(path: string, assertion: string, reason: RegExp, method = 'GET') {
    const r = await send(path, assertion, method);
    assert.equal(r.status, 401, JSON.stringify(r.body));
    assert.match(r.body.reason ?? '', reason);
  }

  test('a valid assertion is accepted and names the subject', async () => {
    const r = await send('/orders/7?page=2', signer.sign(principal, request('/orders/7?page=2')));
    assert.deepEqual(r, { status: 200, body: { sub: 'dev_alice', headers: {} } }, 'nothing known: no email, name or groups anywhere');
    const post = await send('/orders', signer.sign(principal, request('/orders', 'POST')), 'POST');
    assert.equal(post.status, 200);
  });

  test('who the caller is: the verified claims and the plain headers read the same in Python (UTF-8 name, A-label email, groups)', async () => {
    const known = makePrincipal({
      ...principal,
      claims: {
        ...principal.claims,
        email: 'zoe@xn--bcher-kva.example',
        email_verified: true,
        name: 'Zoë Ångström 山田',
        groups: ['admins', 'ops'],
      },
    });
    const request = { method: 'GET', protocol: 'https', host: 'app.example', url: '/me' };
    const sent = svcIdentityHeaders(signer)(request as unknown as Parameters<ReturnType<typeof svcIdentityHeaders>>[0], known);
    const r = await send('/me', sent['svc-assertion'] as string, 'GET', sent);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const who = { email: 'zoe@xn--bcher-kva.example', name: 'Zoë Ångström 山田', groups: ['admins', 'ops'] };
    assert.deepEqual(r.body, { sub: 'dev_alice', ...who, email_verified: true, headers: who });
  });

  test('an expired assertion is refused', async () => {
    const past = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: AUD, clock: { now: () => Date.now() - 120_000 } });
    await refused('/orders/7', past.sign(principal, request('/orders/7')), /ExpiredSignatureError/);
  });

  test('an assertion for another audience is refused', async () => {
    const other = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: 'http://127.0.0.1:4000', clock: { now: Date.now } });
    await refused('/orders/7', other.sign(principal, request('/orders/7')), /InvalidAudienceError/);
  });

  test('an assertion signed by a key the gateway does not publish is refused', async () => {
    const rogueSet = firstAssertionKeySet(freshKey(), Date.now() - 1000);
    const rogue = createAssertionSigner({ keys: () => rogueSet, issuer: 'NODE-A', audience: AUD, clock: { now: Date.now } });
    await refused('/orders/7', rogue.sign(principal, request('/orders/7')), /PyJWKClientError: Unable to find a signing key/);
  });

  test('an altered assertion is refused', async () => {
    const [h, p, s] = signer.sign(principal, request('/orders/7')).split('.') as [string, string, string];
    const payload = { ...JSON.parse(Buffer.from(p, 'base64url').toString()), sub: 'dev_mallory' };
    await refused('/orders/7', `${h}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${s}`, /InvalidSignatureError/);
  });

  test('an unsigned (alg none) assertion is refused', async () => {
    const [h, p] = signer.sign(principal, request('/orders/7')).split('.') as [string, string];
    const none = { ...JSON.parse(Buffer.from(h, 'base64url').toString()), alg: 'none' };
    await refused('/orders/7', `${Buffer.from(JSON.stringify(none)).toString('base64url')}.${p}.`, /InvalidAlgorithmError/);
  });

  test('an assertion lifted from one request is refused on another route and method', async () => {
    const token = signer.sign(principal, request('/orders/7'));
    await refused('/admin/users', token, /request binding/);
    await refused('/orders/7', token, /request binding/, 'DELETE');
  });
});
