import { createPrivateKey, type KeyObject, randomBytes, sign } from 'node:crypto';
import {
  ASSERTION_TYP,
  type AssertionKeyJson,
  type AssertionKeySetJson,
  type AssertionPublicJwk,
  assertionClaims,
  assertionHtu,
  assertionSigningKeyUntil,
  type Clock,
  canonicalOrigin,
  identityHeaders,
  type Principal,
  publishedAssertionKeys,
  type RandomBytes,
} from '@svc/core';
import { provenKeyOf } from './key-binding.js';
import type { UpstreamIdentityHeaders } from './options.js';
import { routeOf } from './routing.js';

/**
 * What the signer reads of the request the gateway received: a Fastify request fits as it is
 * (`protocol` and `host` honour `X-Forwarded-*` only from trusted proxies).
 */
export interface AssertionRequest {
  readonly method: string;
  /** `http` or `https`. */
  readonly protocol: string;
  /** The `Host` (with its port, if any). */
  readonly host: string | undefined;
  /** The request target as received (path and query). */
  readonly url: string;
  /** The thumbprint of the key the request proved possession of (DPoP), passed on as `cnf.jkt`. */
  readonly jkt?: string | null;
  /** The `aud` for this request (its route's `:audience`); absent: the signer's. */
  readonly audience?: string;
  /** The origin of this request's `htu` (its route's `:from` origin, canonical); absent: the signer's public origin, else the request's. */
  readonly origin?: string;
}

/** Signs `Svc-Assertion`s and publishes the keys that verify them. */
export interface AssertionSigner {
  /**
   * The compact JWS for `principal` on `request` (EdDSA, `typ` `svc-assertion+jwt`, `kid`),
   * bound to the request's method and URL (`htu`: the public origin when set, else the
   * request's `scheme://host`, plus the path). Synchronous: it runs once per
   * proxied request, inside the header hook.
   *
   * @throws {TypeError} for a request without a usable `Host`; {@link Error} when no key signs now.
   */
  sign(principal: Principal, request: AssertionRequest): string;
  /** The JWK Set of `GET /.svc/jwks.json`: every key published now (the next one before it signs, the previous one during its overlap). */
  jwks(): { readonly keys: readonly AssertionPublicJwk[] };
}

/** Options of {@link createAssertionSigner}. */
export interface AssertionSignerOptions {
  /** The key set as it is now (re-read by the caller when the file changes). */
  readonly keys: () => AssertionKeySetJson;
  /** The `iss`: the node id (a function, since `svc node rotate-key` changes it under a running node). */
  readonly issuer: string | (() => string);
  /** The `aud`: `:svc/app-audience`, default the upstream's origin. */
  readonly audience: string;
  /**
   * `:svc/app-public-origin`: when set, the origin of every `htu`, whatever `Host` the caller
   * named (so the application checks one URL); absent, each request's scheme and `Host`.
   */
  readonly publicOrigin?: string | null;
  readonly clock: Clock;
  /** Randomness for `jti`; default node:crypto's. */
  readonly random?: RandomBytes;
}

const b64url = (text: string): string => Buffer.from(text).toString('base64url');

/** The bytes of one `jti` (128 bits). */
const JTI_BYTES = 16;
/** How many `jti`s one draw from the CSPRNG serves. */
const JTI_POOL = 256;
/** How many request targets' `htu` a signer remembers, and the longest (with scheme, host and origin) it does. */
const HTU_MEMO_MAX = 512;
const HTU_MEMO_KEY_MAX = 512;
const QUERY_OR_FRAGMENT = /[?#]/;

/**
 * A source of `jti`s: 128-bit values from `random`, drawn {@link JTI_POOL} at a time (one call
 * into the CSPRNG per 256 assertions instead of one per request), each handed out once and then
 * overwritten, so no value is ever served twice.
 */
function jtiSource(random: RandomBytes): () => string {
  let pool = Buffer.alloc(0);
  let next = 0;
  return () => {
    if (next + JTI_BYTES > pool.length) {
      pool = Buffer.from(random(JTI_BYTES * JTI_POOL));
      next = 0;
    }
    const jti = pool.toString('base64url', next, next + JTI_BYTES);
    pool.fill(0, next, next + JTI_BYTES);
    next += JTI_BYTES;
    return jti;
  };
}

/**
 * An {@link AssertionSigner} over a key set: at every `sign` the key set's rules (core) pick the
 * key that signs at the clock's now, so a rotation switches keys at its time without a restart.
 * Signing is node:crypto's Ed25519 (synchronous; see docs/assertion.md for its cost per request).
 *
 * @throws {TypeError} when `opts.publicOrigin` is not an http(s) origin.
 * @example
 * const signer = createAssertionSigner({ keys: () => set, issuer: nodeId, audience: 'http://127.0.0.1:3000', clock: { now: Date.now } });
 * headers['svc-assertion'] = signer.sign(request.principal, request);
 */
export function createAssertionSigner(opts: AssertionSignerOptions): AssertionSigner {
  const publicOrigin = opts.publicOrigin === undefined || opts.publicOrigin === null ? null : canonicalOrigin(opts.publicOrigin);
  if (publicOrigin === null && opts.publicOrigin !== undefined && opts.publicOrigin !== null) {
    throw new TypeError(`publicOrigin must be an http(s) origin such as https://app.example.com: ${opts.publicOrigin}`);
  }
  const jti = jtiSource(opts.random ?? randomBytes);
  const issuer = typeof opts.issuer === 'string' ? () => opts.issuer as string : opts.issuer;
  // One private KeyObject and one encoded header per key id: parsing a key per request would cost more than signing.
  const prepared = new Map<string, { readonly key: KeyObject; readonly header: string }>();
  const prepare = (kid: string, x: string, d: string) => {
    let p = prepared.get(kid);
    if (p === undefined) {
      if (prepared.size >= 4) prepared.clear(); // keys rotated out (rare): drop their private halves
      p = {
        key: createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', x, d }, format: 'jwk' }),
        header: b64url(JSON.stringify({ alg: 'EdDSA', typ: ASSERTION_TYP, kid })),
      };
      prepared.set(kid, p);
    }
    return p;
  };
  // The key that signs, kept while the same key set says the same (core says until when), so a
  // request does not parse the set's RFC 3339 times; a clock that goes back asks again.
  let chosen: { set: AssertionKeySetJson; from: number; until: number; key: AssertionKeyJson | null } | null = null;
  const signingKey = (now: number): AssertionKeyJson | null => {
    const set = opts.keys();
    if (chosen === null || chosen.set !== set || now < chosen.from || now >= chosen.until) {
      const { key, until } = assertionSigningKeyUntil(set, now);
      chosen = { set, from: now, until, key };
    }
    return chosen.key;
  };
  // The `htu` of the targets requested most (a pure function of its inputs), within bounds.
  const htus = new Map<string, string>();
  const htuOf = (protocol: string, host: string | undefined, target: string, origin: string | null): string => {
    // The query and fragment never reach the `htu` (core drops them first): not in the memo's key either.
    const path = target.split(QUERY_OR_FRAGMENT, 1)[0] as string;
    const memo = `${protocol}\n${host ?? ''}\n${origin ?? ''}\n${path}`;
    let htu = htus.get(memo);
    if (htu === undefined) {
      htu = assertionHtu(protocol, host, path, origin);
      if (memo.length <= HTU_MEMO_KEY_MAX) {
        if (htus.size >= HTU_MEMO_MAX) htus.clear();
        htus.set(memo, htu);
      }
    }
    return htu;
  };
  return {
    sign(principal, request) {
      const now = opts.clock.now();
      const key = signingKey(now);
      if (key === null || key.d === null) throw new Error('no assertion key signs now; run `svc app rotate-key`');
      const { key: privateKey, header } = prepare(key.kid, key.x, key.d);
      const claims = assertionClaims(principal, {
        issuer: issuer(),
        audience: request.audience ?? opts.audience,
        now,
        jti: jti(),
        method: request.method,
        htu: htuOf(request.protocol, request.host, request.url, request.origin ?? publicOrigin),
        jkt: request.jkt ?? null,
      });
      const input = `${header}.${b64url(JSON.stringify(claims))}`;
      return `${input}.${sign(null, Buffer.from(input), privateKey).toString('base64url')}`;
    },
    jwks() {
      return { keys: publishedAssertionKeys(opts.keys(), opts.clock.now()) };
    },
  };
}

/**
 * The contract's identity headers of upstream mode for a request (a ready
 * `UpstreamAttachOptions.identityHeaders`): `Svc-Subject`, `Svc-Realm`, `Svc-Session`,
 * `Svc-Device`, who the caller is when known (core's `identityHeaders`: `Svc-Email`, `Svc-Name`
 * percent-encoded, `Svc-Groups` comma-separated; absent when unknown, never empty) and the
 * signed `Svc-Assertion`; none on a public path (no principal).
 *
 * @example
 * const attach = upstreamAttach({ upstream: new URL(app.upstream), identityHeaders: svcIdentityHeaders(signer) });
 */
export function svcIdentityHeaders(signer: AssertionSigner): UpstreamIdentityHeaders {
  return (req, principal) => {
    if (principal === null) return {};
    // A routed request is bound to its route: its audience, and its `:from` origin in `htu`.
    const route = routeOf(req.raw);
    return {
      'svc-subject': principal.subject,
      'svc-realm': principal.realm,
      'svc-session': principal.session,
      'svc-device': principal.device,
      ...identityHeaders(principal.claims),
      'svc-assertion': signer.sign(principal, {
        method: req.method,
        protocol: req.protocol,
        host: req.host,
        url: req.url,
        jkt: provenKeyOf(req.raw),
        ...(route === undefined ? {} : { audience: route.audience, origin: route.origin }),
      }),
    };
  };
}
