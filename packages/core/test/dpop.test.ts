import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { test } from 'node:test';
import { ConfigError, type EdnValue, validateProjectConfig } from '@svc/core/config';
import { jwkThumbprint, normalizedHtu, verifyDpopProof } from '../src/dpop.js';
import { accessTokenHash, publicJwkOfHex, publicKeyHexOf, thumbprintOfPublicKeyHex } from '../src/index.js';

// RFC 8037 Appendix A: the Ed25519 key of RFC 8032 §7.1 test 1, its JWK and its RFC 7638 thumbprint.
const RFC_KEY_HEX = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';
const RFC_X = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo';
const RFC_THUMBPRINT = 'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k';

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
const HTU = 'http://127.0.0.1:9090/v1/auth/refresh';

function deviceKey() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const hex = publicKeyHexOf(publicKey);
  return { hex, jkt: thumbprintOfPublicKeyHex(hex), sign: (m: string) => sign(null, Buffer.from(m, 'ascii'), privateKey) };
}
type Key = ReturnType<typeof deviceKey>;

function proof(key: Key, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): string {
  const b64 = (v: object) => Buffer.from(JSON.stringify(v), 'utf8').toString('base64url');
  const h = b64({ typ: 'dpop+jwt', alg: 'EdDSA', jwk: publicJwkOfHex(key.hex), ...header });
  const p = b64({ htm: 'POST', htu: HTU, iat: Math.floor(NOW / 1000), jti: randomBytes(16).toString('base64url'), ...claims });
  return `${h}.${p}.${key.sign(`${h}.${p}`).toString('base64url')}`;
}

async function refusedCode(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    return String((e as { code?: unknown }).code);
  }
  return 'accepted';
}

test('the JWK and RFC 7638 thumbprint of an Ed25519 key are those of RFC 8037 Appendix A', () => {
  assert.deepEqual(publicJwkOfHex(RFC_KEY_HEX), { kty: 'OKP', crv: 'Ed25519', x: RFC_X });
  assert.equal(jwkThumbprint({ x: RFC_X }), RFC_THUMBPRINT);
  assert.equal(thumbprintOfPublicKeyHex(RFC_KEY_HEX.toUpperCase().toLowerCase()), RFC_THUMBPRINT);
});

test('a proof by the bound key for this method and URL verifies, and says its jti and when it expires', async () => {
  const key = deviceKey();
  const verified = await verifyDpopProof(proof(key, { jti: 'j'.repeat(22) }), { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt });
  assert.equal(verified.jkt, key.jkt);
  assert.equal(verified.jti, 'j'.repeat(22));
  assert.equal(verified.expiresAt, NOW + 61_000);
});

test('htu is compared as origin and path: case of scheme and host, a default port and the query do not matter', async () => {
  assert.equal(normalizedHtu('HTTP://LocalHost:80/v1/auth/refresh?x=1#f'), 'http://localhost/v1/auth/refresh');
  const key = deviceKey();
  const ok = proof(key, { htu: 'HTTP://127.0.0.1:9090/v1/auth/refresh?x=1' });
  assert.equal(await refusedCode(verifyDpopProof(ok, { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt })), 'accepted');
  for (const htu of [
    'http://127.0.0.1:9091/v1/auth/refresh',
    'https://127.0.0.1:9090/v1/auth/refresh',
    'http://127.0.0.1:9090/v1/auth/refresh/',
    'ftp://x/',
  ]) {
    assert.equal(
      await refusedCode(verifyDpopProof(proof(key, { htu }), { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt })),
      'invalid_dpop_proof',
      htu,
    );
  }
});

test('the freshness window is 60 s in the past and 5 s in the future', async () => {
  const key = deviceKey();
  const at = (iatMs: number) =>
    refusedCode(verifyDpopProof(proof(key, { iat: Math.floor(iatMs / 1000) }), { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt }));
  assert.equal(await at(NOW - 60_000), 'accepted');
  assert.equal(await at(NOW - 61_000), 'invalid_dpop_proof');
  assert.equal(await at(NOW + 5_000), 'accepted');
  assert.equal(await at(NOW + 6_000), 'invalid_dpop_proof');
});

test('with an access token, ath must be the base64url SHA-256 of exactly that token', async () => {
  const key = deviceKey();
  const expect = { htm: 'GET', htu: HTU, now: NOW, jkt: key.jkt, accessToken: 'svca_token-one' };
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { htm: 'GET', ath: accessTokenHash('svca_token-one') }), expect)), 'accepted');
  assert.equal(
    await refusedCode(verifyDpopProof(proof(key, { htm: 'GET', ath: accessTokenHash('svca_token-two') }), expect)),
    'invalid_dpop_proof',
  );
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { htm: 'GET' }), expect)), 'invalid_dpop_proof');
});

test('a nonce the server asked for must be carried', async () => {
  const key = deviceKey();
  const expect = { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt, nonce: 'nonce-0123456789ab' };
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { nonce: 'nonce-0123456789ab' }), expect)), 'accepted');
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { nonce: 'nonce-0123456789ac' }), expect)), 'invalid_dpop_proof');
  assert.equal(await refusedCode(verifyDpopProof(proof(key), expect)), 'invalid_dpop_proof');
});

test('a forged signature, a short or missing jti, a non-canonical x and a non-string proof are refused', async () => {
  const key = deviceKey();
  const expect = { htm: 'POST', htu: HTU, now: NOW, jkt: key.jkt };
  const good = proof(key);
  const [h, p] = good.split('.') as [string, string];
  const other = deviceKey();
  assert.equal(
    await refusedCode(verifyDpopProof(`${h}.${p}.${other.sign(`${h}.${p}`).toString('base64url')}`, expect)),
    'invalid_dpop_proof',
  );
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { jti: 'short' }), expect)), 'invalid_dpop_proof');
  assert.equal(await refusedCode(verifyDpopProof(proof(key, { jti: undefined }), expect)), 'invalid_dpop_proof');
  assert.equal(
    await refusedCode(verifyDpopProof(proof(key, {}, { jwk: { kty: 'OKP', crv: 'Ed25519', x: `${publicJwkOfHex(key.hex).x}=` } }), expect)),
    'invalid_dpop_proof',
  );
  for (const bad of [undefined, 42, '', 'a.b', `${good}.x`]) {
    assert.equal(await refusedCode(verifyDpopProof(bad, expect)), 'invalid_dpop_proof', String(bad));
  }
});

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
function load(value: EdnValue) {
  return validateProjectConfig(
    m({
      ':svc/project': 'demo',
      ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
      ':svc/modules': m({
        ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
        ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store'), ':auth/sender-constraint': value }) }),
      }),
    }),
    { file: 'p/project.edn' },
  );
}

test(':auth/sender-constraint takes one keyword for both realms, or a map per realm (a realm left out keeps :refresh)', () => {
  assert.deepEqual(load(kw('required')).auth.senderConstraint, { management: 'required', application: 'required' });
  assert.deepEqual(load(kw('off')).auth.senderConstraint, { management: 'off', application: 'off' });
  assert.deepEqual(load(m({ ':management': kw('required') })).auth.senderConstraint, { management: 'required', application: 'refresh' });
});

test(':auth/sender-constraint refuses anything else, naming the key', () => {
  for (const bad of [kw('strict'), 'required', m({ ':staging': kw('off') }), m({ ':application': kw('maybe') })]) {
    assert.throws(
      () => load(bad),
      (e: unknown) => e instanceof ConfigError && e.problems.some((p) => p.key.endsWith(':auth/sender-constraint')),
    );
  }
});
