import assert from 'node:assert/strict';
import { createHmac, createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MAX_ASSERTION_LIFETIME_SECONDS, verifySvcAssertion } from '@svc/assertion';
import { type AssertionKeySetJson, type FreshAssertionKey, firstAssertionKeySet, makePrincipal, rotateAssertionKeySet } from '@svc/core';
import {
  ASSERTION_KEY_OVERLAP_SECONDS,
  ASSERTION_KEY_PREPUBLISH_SECONDS,
  ASSERTION_MAX_TTL_SECONDS,
  ASSERTION_TTL_SECONDS,
} from '@svc/core/settings';
import { type AssertionSigner, createAssertionSigner, svcIdentityHeaders } from '@svc/server';
import Fastify from 'fastify';

const T0 = Date.parse('2026-11-23T12:00:00.000Z');
const AUD = 'http://127.0.0.1:3000';
const principal = makePrincipal({
  subject: 'dev_alice',
  realm: 'application',
  session: 'ses_alice',
  device: 'dev_alice',
  claims: { amr: ['device_key'], auth_time: '2026-11-23T11:59:00.000Z', exp: '2026-12-23T11:59:00.000Z' },
});
const REQ = { method: 'GET', protocol: 'https', host: 'app.example', url: '/orders/7?page=2' };
const REQ_URL = 'https://app.example/orders/7?page=2';

const freshKey = (): FreshAssertionKey => {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
};
const privateOf = (set: AssertionKeySetJson, i = 0): KeyObject => {
  const k = set.keys[i];
  assert.ok(k?.d);
  return createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x: k.x, d: k.d }, format: 'jwk' });
};
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const parts = (token: string) => {
  const [h, p] = token.split('.') as [string, string];
  return { header: JSON.parse(Buffer.from(h, 'base64url').toString()), payload: JSON.parse(Buffer.from(p, 'base64url').toString()) };
};
/** A JWS made by hand: what an attacker (or a broken signer) could send. */
function forge(header: object, payload: object, key: KeyObject | null): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${key === null ? '' : sign(null, Buffer.from(input), key).toString('base64url')}`;
}

class FakeClock {
  constructor(public t: number) {}
  now = () => this.t;
}

/** A plain HTTP server serving `signer.jwks()` as the gateway's `/.svc/jwks.json` does. */
async function serveJwks(signer: () => AssertionSigner): Promise<{ server: Server; url: URL; fetches: () => number }> {
  let n = 0;
  const server = createServer((req, res) => {
    n++;
    if (req.url !== '/.svc/jwks.json') return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(JSON.stringify(signer().jwks()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { server, url: new URL(`http://127.0.0.1:${port}/.svc/jwks.json`), fetches: () => n };
}

describe('Svc-Assertion signing and verification', () => {
  const clock = new FakeClock(T0);
  let set = firstAssertionKeySet(freshKey(), T0 - 3600_000);
  const signer = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: AUD, clock });
  const jwks = () => signer.jwks();
  const at = (t: number) => new Date(t);
  const verify = (token: string, extra: Partial<Parameters<typeof verifySvcAssertion>[1]> = {}) =>
    verifySvcAssertion(token, {
      jwks: jwks(),
      audience: AUD,
      request: { method: 'GET', url: REQ_URL },
      currentDate: at(clock.t),
      ...extra,
    });
  const refused = async (p: Promise<unknown>, code: string) => {
    await assert.rejects(p, (e: Error & { code?: string }) => {
      assert.equal(e.name, 'SvcAssertionError');
      assert.equal(e.code, code, e.message);
      return true;
    });
  };

  test('the verifier and the core agree on the 60 s bound', () => {
    assert.equal(MAX_ASSERTION_LIFETIME_SECONDS, ASSERTION_MAX_TTL_SECONDS);
  });

  test('an assertion has the contract header and claims, and verifies to the principal', async () => {
    const token = signer.sign(principal, REQ);
    const { header, payload } = parts(token);
    assert.deepEqual(header, { alg: 'EdDSA', typ: 'svc-assertion+jwt', kid: set.keys[0]?.kid });
    assert.deepEqual(Object.keys(payload).sort(), [
      'aud',
      'claims',
      'dev',
      'exp',
      'htm',
      'htu',
      'iat',
      'iss',
      'jti',
      'realm',
      'sid',
      'sub',
    ]);
    assert.equal(payload.exp - payload.iat, ASSERTION_TTL_SECONDS);
    assert.equal(payload.htu, 'https://app.example/orders/7');
    assert.equal(payload.htm, 'GET');
    const who = await verify(token);
    assert.deepEqual(who, {
      subject: 'dev_alice',
      realm: 'application',
      session: 'ses_alice',
      device: 'dev_alice',
      claims: { amr: ['device_key'], auth_time: '2026-11-23T11:59:00.000Z', exp: '2026-12-23T11:59:00.000Z' },
      issuer: 'NODE-A',
      assertionId: payload.jti,
      expiresAt: payload.exp,
    });
    assert.notEqual(parts(signer.sign(principal, REQ)).payload.jti, payload.jti, 'every assertion has its own jti');
  });

  test('replayed jti: every assertion has its own 128-bit jti, across refills of the pooled CSPRNG draw', () => {
    let draws = 0;
    const counted = createAssertionSigner({
      keys: () => set,
      issuer: 'NODE-A',
      audience: AUD,
      clock,
      random: (n) => {
        draws++;
        return randomBytes(n);
      },
    });
    const jtis = new Set<string>();
    const n = 1000;
    for (let i = 0; i < n; i++) {
      const jti = parts(counted.sign(principal, REQ)).payload.jti as string;
      assert.equal(Buffer.from(jti, 'base64url').length, 16, 'a jti is 128 bits');
      jtis.add(jti);
    }
    assert.equal(jtis.size, n, 'no jti is ever served twice');
    assert.ok(draws >= 2 && draws < n / 100, `the CSPRNG is drawn from in batches (${draws} draws for ${n} assertions)`);
  });

  test('the JWK Set holds public keys only (kty OKP, crv Ed25519, kid, use sig, alg EdDSA)', () => {
    const keys = signer.jwks().keys;
    assert.equal(keys.length, 1);
    assert.deepEqual(Object.keys(keys[0] as object).sort(), ['alg', 'crv', 'kid', 'kty', 'use', 'x']);
  });

  test('expired: an assertion used after its exp is refused', async () => {
    const token = signer.sign(principal, REQ);
    await refused(verify(token, { currentDate: at(clock.t + (ASSERTION_TTL_SECONDS + 1) * 1000), clockToleranceSeconds: 0 }), 'expired');
  });

  test('wrong audience: an assertion for one application is refused by another', async () => {
    await refused(verify(signer.sign(principal, REQ), { audience: 'http://127.0.0.1:4000' }), 'wrong_audience');
  });

  test('wrong issuer: refused when the verifier pins the gateway node', async () => {
    await refused(verify(signer.sign(principal, REQ), { issuer: 'NODE-B' }), 'wrong_issuer');
    await verify(signer.sign(principal, REQ), { issuer: 'NODE-A' });
  });

  test('wrong key: an assertion signed by a key the gateway does not publish is refused', async () => {
    const attacker = firstAssertionKeySet(freshKey(), T0);
    const rogue = createAssertionSigner({ keys: () => attacker, issuer: 'NODE-A', audience: AUD, clock });
    await refused(verify(rogue.sign(principal, REQ)), 'unknown_key');
    // ... also when it claims the gateway's kid.
    const { header, payload } = parts(rogue.sign(principal, REQ));
    await refused(verify(forge({ ...header, kid: set.keys[0]?.kid }, payload, privateOf(attacker))), 'bad_signature');
  });

  test('altered payload: changing any claim breaks the signature', async () => {
    const token = signer.sign(principal, REQ);
    const [h, , s] = token.split('.') as [string, string, string];
    const { payload } = parts(token);
    await refused(verify(`${h}.${b64({ ...payload, sub: 'dev_mallory' })}.${s}`), 'bad_signature');
    await refused(verify(`${h}.${b64({ ...payload, htu: 'https://app.example/admin' })}.${s}`, { request: undefined }), 'bad_signature');
  });

  test('alg none: an unsigned assertion is refused', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    await refused(verify(forge({ ...header, alg: 'none' }, payload, null)), 'wrong_algorithm');
  });

  test('HS256 confusion: an assertion MACed with the published public key is refused', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    const x = set.keys[0]?.x as string;
    for (const secret of [x, Buffer.from(x, 'base64url'), JSON.stringify(signer.jwks().keys[0])]) {
      const input = `${b64({ ...header, alg: 'HS256' })}.${b64(payload)}`;
      await refused(verify(`${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`), 'wrong_algorithm');
    }
  });

  test('wrong typ: a JWT the same key signed for another purpose is not an assertion', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    await refused(verify(forge({ ...header, typ: 'JWT' }, payload, privateOf(set))), 'wrong_typ');
    const { typ: _typ, ...untyped } = header;
    await refused(verify(forge(untyped, payload, privateOf(set))), 'wrong_typ');
  });

  test('exp too far: an assertion valid longer than 60 s is refused even when properly signed', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    await refused(verify(forge(header, { ...payload, exp: payload.iat + 61 }, privateOf(set))), 'lifetime_too_long');
    await verify(forge(header, { ...payload, exp: payload.iat + 60 }, privateOf(set)));
  });

  test('issued in the future: refused beyond the clock tolerance', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    const future = { ...payload, iat: payload.iat + 30, exp: payload.exp + 30 };
    await refused(verify(forge(header, future, privateOf(set)), { clockToleranceSeconds: 5 }), 'not_yet_valid');
  });

  test('request binding: an assertion lifted from one request is refused on another route, method or host', async () => {
    const token = signer.sign(principal, REQ);
    await refused(verify(token, { request: { method: 'GET', url: 'https://app.example/admin/users' } }), 'request_mismatch');
    await refused(verify(token, { request: { method: 'DELETE', url: REQ_URL } }), 'request_mismatch');
    await refused(verify(token, { request: { method: 'GET', url: 'https://other.example/orders/7' } }), 'request_mismatch');
    await refused(verify(token, { request: { method: 'GET', url: 'http://app.example/orders/7' } }), 'request_mismatch');
    // The query is not bound (as DPoP's htu); a normalised form of the same URL is the same request.
    await verify(token, { request: { method: 'get', url: 'https://APP.example:443/orders/7?page=3' } });
  });

  test('missing claim: a signed token without the request binding is refused', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    const { htu: _htu, ...rest } = payload;
    await refused(verify(forge(header, rest, privateOf(set)), { request: undefined }), 'missing_claim');
    await refused(verifySvcAssertion(undefined, { jwks: jwks(), audience: AUD }), 'malformed');
    await refused(verifySvcAssertion('not.a.jws', { jwks: jwks(), audience: AUD }), 'malformed');
  });

  test('ill-typed identity claims (a signer bug or a foreign token under the same key) are refused, not passed on', async () => {
    const { header, payload } = parts(signer.sign(principal, REQ));
    for (const bad of [{ groups: 'ops' }, { groups: ['ops', 7] }, { email: 42 }, { email: '' }, { name: ['Ada'] }]) {
      await refused(verify(forge(header, { ...payload, ...bad }, privateOf(set))), 'missing_claim');
    }
    const odd = await verify(forge(header, { ...payload, email: 'a@example.com', email_verified: 'yes' }, privateOf(set)));
    assert.equal(odd.emailVerified, false, 'only true is verified');
  });

  test('a request without a Host cannot get an assertion', () => {
    assert.throws(() => signer.sign(principal, { ...REQ, host: undefined }), TypeError);
  });

  test('a Fastify request is bound as the gateway received it (X-Forwarded-* only from a trusted proxy)', async () => {
    for (const trustProxy of [false, '127.0.0.1']) {
      const app = Fastify({ trustProxy });
      app.all('/*', async (req) => parts(signer.sign(principal, req)).payload);
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const res = await fetch(`${address}/orders/7?page=2`, {
          method: 'POST',
          headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example' },
        });
        const claims = (await res.json()) as { htm: string; htu: string };
        assert.equal(claims.htm, 'POST');
        assert.equal(claims.htu, trustProxy === false ? `${address}/orders/7` : 'https://app.example/orders/7');
      } finally {
        await app.close();
      }
    }
  });

  test('htu follows Host: with :svc/app-public-origin set, a caller naming another host name still gets an assertion bound to the public origin', async () => {
    const publicOrigin = 'https://app.example.com';
    const pinned = createAssertionSigner({ keys: () => set, issuer: 'NODE-A', audience: AUD, clock, publicOrigin });
    const app = Fastify({ trustProxy: false });
    app.all('/*', async (req) => ({ token: pinned.sign(principal, req) }));
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      // The same request, once by the listener's address and once through another name for it.
      for (const host of [new URL(address).host, 'internal-alias.lan:8443']) {
        const res = await fetch(`${address}/orders/7?page=2`, { method: 'POST', headers: { host } });
        const { token } = (await res.json()) as { token: string };
        assert.equal(parts(token).payload.htu, `${publicOrigin}/orders/7`, host);
        // The documented check: the application verifies against the URL its callers use.
        const verified = await verifySvcAssertion(token, {
          jwks: pinned.jwks(),
          audience: AUD,
          request: { method: 'POST', url: `${publicOrigin}/orders/7?page=2` },
          currentDate: at(clock.t),
        });
        assert.equal(verified.subject, principal.subject);
        await refused(
          verifySvcAssertion(token, {
            jwks: pinned.jwks(),
            audience: AUD,
            request: { method: 'POST', url: `http://${host}/orders/7` },
            currentDate: at(clock.t),
          }),
          'request_mismatch',
        );
      }
    } finally {
      await app.close();
    }
  });

  test('the upstream identity headers: the Svc-* facts and the assertion; none without a principal', async () => {
    const headers = svcIdentityHeaders(signer);
    const fake = REQ as unknown as Parameters<typeof headers>[0];
    const h = headers(fake, principal);
    assert.deepEqual(Object.keys(h).sort(), ['svc-assertion', 'svc-device', 'svc-realm', 'svc-session', 'svc-subject']);
    assert.equal(h['svc-subject'], 'dev_alice');
    assert.equal((await verify(h['svc-assertion'] as string)).session, h['svc-session']);
    assert.deepEqual(headers(fake, null), {});
  });

  const known = makePrincipal({
    ...principal,
    claims: {
      ...principal.claims,
      email: 'zoe@xn--bcher-kva.example',
      email_verified: true,
      name: 'Zoë Ångström 山田, "<b>"',
      groups: ['admins', 'ops'],
    },
  });

  test('who the caller is: Svc-Email (ASCII, A-label), Svc-Name (percent-encoded UTF-8), Svc-Groups (comma-separated)', async () => {
    const headers = svcIdentityHeaders(signer);
    const h = headers(REQ as unknown as Parameters<typeof headers>[0], known);
    assert.equal(h['svc-email'], 'zoe@xn--bcher-kva.example');
    assert.equal(h['svc-name'], 'Zo%C3%AB%20%C3%85ngstr%C3%B6m%20%E5%B1%B1%E7%94%B0%2C%20%22%3Cb%3E%22');
    assert.equal(decodeURIComponent(h['svc-name'] as string), 'Zoë Ångström 山田, "<b>"');
    assert.equal(h['svc-groups'], 'admins,ops');
    for (const [name, value] of Object.entries(h)) assert.match(value, /^[\x21-\x7e]+$/, `${name} is visible ASCII, never empty`);
  });

  test('unknown attributes: no Svc-Email, Svc-Name or Svc-Groups header, no email/name/groups claim (never empty)', async () => {
    const headers = svcIdentityHeaders(signer);
    const h = headers(REQ as unknown as Parameters<typeof headers>[0], principal);
    for (const name of ['svc-email', 'svc-name', 'svc-groups']) assert.equal(name in h, false, name);
    const { payload } = parts(h['svc-assertion'] as string);
    for (const claim of ['email', 'email_verified', 'name', 'groups']) assert.equal(claim in payload, false, claim);
    const who = await verify(h['svc-assertion'] as string);
    for (const field of ['email', 'emailVerified', 'name', 'groups']) assert.equal(field in who, false, field);
  });

  test('the assertion carries email, email_verified, name and groups (an array) at the top level, and verifies to them', async () => {
    const token = signer.sign(known, REQ);
    const { payload } = parts(token);
    assert.equal(payload.email, 'zoe@xn--bcher-kva.example');
    assert.equal(payload.email_verified, true);
    assert.equal(payload.name, 'Zoë Ångström 山田, "<b>"');
    assert.deepEqual(payload.groups, ['admins', 'ops']);
    assert.deepEqual(Object.keys(payload.claims).sort(), ['amr', 'auth_time', 'exp'], 'claims: how it signed in only');
    const who = await verify(token);
    assert.equal(who.email, 'zoe@xn--bcher-kva.example');
    assert.equal(who.emailVerified, true);
    assert.equal(who.name, 'Zoë Ångström 山田, "<b>"');
    assert.deepEqual(who.groups, ['admins', 'ops']);
    const unverified = makePrincipal({ ...known, claims: { ...known.claims, email_verified: false } });
    assert.equal((await verify(signer.sign(unverified, REQ))).emailVerified, false);
  });

  describe('key rotation with overlap, through a real JWK Set server', () => {
    let jwksServer: Awaited<ReturnType<typeof serveJwks>>;
    before(async () => {
      jwksServer = await serveJwks(() => signer);
    });
    after(() => jwksServer.server.close());
    const published = async () => (await (await fetch(jwksServer.url)).json()) as { keys: { kid: string }[] };

    test('a remote JWK Set verifies (fetched once, then cached)', async () => {
      clock.t = T0;
      const token = signer.sign(principal, REQ);
      await verify(token, { jwks: jwksServer.url });
      await verify(signer.sign(principal, REQ), { jwks: jwksServer.url });
      assert.equal(jwksServer.fetches(), 1);
    });

    test('the next key is in the JWK Set before it signs; the previous key verifies during the overlap and not after', async () => {
      clock.t = T0;
      const oldKid = set.keys[0]?.kid as string;
      const r = rotateAssertionKeySet(set, freshKey(), clock.t, { immediate: false });
      assert.equal(r.outcome, 'rotated');
      if (r.outcome !== 'rotated') return;
      set = r.set;
      const nextKid = r.next.kid;
      const switchAt = T0 + ASSERTION_KEY_PREPUBLISH_SECONDS * 1000;
      // Pre-publication: the next key is served, the old one still signs.
      assert.deepEqual((await published()).keys.map((k) => k.kid).sort(), [oldKid, nextKid].sort());
      assert.equal(parts(signer.sign(principal, REQ)).header.kid, oldKid);
      // A verifier that cached the set now will know the next key when it meets it.
      const cached = await published();
      clock.t = switchAt - 1000;
      const lastOld = signer.sign(principal, REQ);
      assert.equal(parts(lastOld).header.kid, oldKid);
      clock.t = switchAt;
      const firstNew = signer.sign(principal, REQ);
      assert.equal(parts(firstNew).header.kid, nextKid);
      await verifySvcAssertion(firstNew, { jwks: cached, audience: AUD, currentDate: new Date(clock.t) });
      // Overlap: what the old key signed last verifies against the set served after the switch.
      clock.t = switchAt + (ASSERTION_KEY_OVERLAP_SECONDS - 1) * 1000;
      const during = await published();
      assert.ok(during.keys.some((k) => k.kid === oldKid));
      await verifySvcAssertion(lastOld, { jwks: during, audience: AUD, currentDate: new Date(switchAt) });
      // After the overlap the old key is withdrawn: nothing it signed verifies any more.
      clock.t = switchAt + ASSERTION_KEY_OVERLAP_SECONDS * 1000;
      const afterOverlap = await published();
      assert.deepEqual(
        afterOverlap.keys.map((k) => k.kid),
        [nextKid],
      );
      await refused(verifySvcAssertion(lastOld, { jwks: afterOverlap, audience: AUD, currentDate: new Date(switchAt) }), 'unknown_key');
    });
  });
});
