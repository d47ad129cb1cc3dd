/**
 * The gateway's `Svc-Assertion` (contract, "Application gateway", step 3): its claims, its
 * request binding, and the rules of its key set: which key signs at a given time, which keys
 * are published in `/.svc/jwks.json`, and what a rotation changes. Pure: the signing and the
 * key file are the server's and the CLI's.
 */
import { createHash } from 'node:crypto';
import type { AppGatewayConfig } from './app-config.js';
import type { Principal, PrincipalClaims } from './principal.js';
import type { Realm } from './realm.js';
import { ASSERTION_KEY_OVERLAP_SECONDS, ASSERTION_KEY_PREPUBLISH_SECONDS, ASSERTION_TTL_SECONDS } from './settings.js';
import { rfc3339 } from './time.js';

/** The JOSE header `typ` of an assertion (explicit typing, RFC 8725 section 3.11). */
export const ASSERTION_TYP = 'svc-assertion+jwt';

/** The claims of a `Svc-Assertion`. */
export interface AssertionClaims {
  /** The node id of the gateway that signed it. */
  readonly iss: string;
  /** `:svc/app-audience`, default the upstream's origin. */
  readonly aud: string;
  readonly sub: string;
  readonly sid: string;
  readonly dev: string;
  readonly realm: Realm;
  /** How the caller signed in: `amr`, `auth_time`, `exp` (who the caller is goes at the top level, below). */
  readonly claims: Pick<PrincipalClaims, 'amr' | 'auth_time' | 'exp'>;
  /** The caller's email (ASCII, an internationalised domain in A-label form), when known. */
  readonly email?: string;
  /** Whether that email was verified (present exactly when `email` is). */
  readonly email_verified?: boolean;
  /** The caller's display name (UTF-8, NFC), when known. */
  readonly name?: string;
  /** The caller's groups (sorted group names), when it is in any. */
  readonly groups?: readonly string[];
  /** Seconds since the epoch. */
  readonly iat: number;
  /** `iat` + {@link ASSERTION_TTL_SECONDS}. */
  readonly exp: number;
  readonly jti: string;
  /** The request binding (as DPoP, RFC 9449): the method the gateway received. */
  readonly htm: string;
  /** The request binding: `:svc/app-public-origin` (else the origin the gateway received) plus the path, without query or fragment. */
  readonly htu: string;
  /** The key the caller proved possession of with a DPoP proof (RFC 9449 / RFC 7800 `cnf.jkt`); absent for a bearer. */
  readonly cnf?: { readonly jkt: string };
}

/**
 * The `htu` of a request (the contract's "Attach"): `publicOrigin` (`:svc/app-public-origin`)
 * when set, else the request's scheme and `Host` (with the port, if any), plus the path of its
 * request target, without query and fragment, normalised as a WHATWG URL (lower-case scheme and
 * host, no default port, dot segments resolved), so the gateway and a verifier that normalise
 * the same way agree. With a public origin, the `Host` a caller names plays no part: an
 * application checks the assertion against the one URL its callers use, whatever name (an
 * internal alias, an address) reached the gateway. A request target in absolute form keeps
 * only its path. Throws a TypeError for a request without a usable `Host` and no public origin.
 *
 * @example
 * assertionHtu('https', 'App.Example:443', '/orders/7?page=2'); // "https://app.example/orders/7"
 * assertionHtu('http', '10.0.0.5:8080', '/orders/7', 'https://app.example'); // "https://app.example/orders/7"
 */
export function assertionHtu(protocol: string, host: string | undefined, requestTarget: string, publicOrigin?: string | null): string {
  let path = requestTarget.split(/[?#]/, 1)[0] as string;
  if (!path.startsWith('/')) {
    // absolute-form (`GET http://host/path HTTP/1.1`): only its path; `*` and the like: the root.
    try {
      path = new URL(path).pathname;
    } catch {
      path = '/';
    }
  }
  if (publicOrigin !== undefined && publicOrigin !== null) {
    const origin = new URL(publicOrigin).origin;
    // Joined as text: resolving the path against the origin would read `//x/y` as an authority.
    const joined = new URL(`${origin}${path}`);
    return `${joined.origin}${joined.pathname}`;
  }
  if (host === undefined || host === '') throw new TypeError('a request without a Host cannot be bound into an assertion');
  let url: URL;
  try {
    url = new URL(`${protocol}://${host}`);
  } catch {
    throw new TypeError(`the Host ${JSON.stringify(host)} is not a host`);
  }
  if (url.pathname !== '/' || url.username !== '' || url.password !== '')
    throw new TypeError(`the Host ${JSON.stringify(host)} is not a host`);
  // Joined as text: resolving the path against the origin would read `//x/y` as an authority.
  const joined = new URL(`${url.origin}${path}`);
  return `${joined.origin}${joined.pathname}`;
}

/**
 * The claims of the assertion for `principal` on one request: who (sub, sid, dev, realm, and
 * when known `email`, `email_verified`, `name`, `groups` at the top level: absent when unknown,
 * never empty), how it signed in (`claims`: amr, auth_time, exp), for whom (aud), by whom (iss), when (iat, exp = iat + 30 s), which
 * request (htm, htu) and a unique `jti`.
 *
 * @example
 * const claims = assertionClaims(principal, { issuer: nodeId, audience: 'http://127.0.0.1:3000', now: Date.now(), jti, method: 'GET', htu });
 */
export function assertionClaims(
  principal: Principal,
  at: {
    readonly issuer: string;
    readonly audience: string;
    readonly now: number;
    readonly jti: string;
    readonly method: string;
    readonly htu: string;
    /** The thumbprint of the key the request proved possession of (DPoP), if it did. */
    readonly jkt?: string | null;
  },
): AssertionClaims {
  const iat = Math.floor(at.now / 1000);
  const c = principal.claims;
  return {
    iss: at.issuer,
    aud: at.audience,
    sub: principal.subject,
    sid: principal.session,
    dev: principal.device,
    realm: principal.realm,
    claims: { amr: c.amr, auth_time: c.auth_time, exp: c.exp },
    ...(c.email === undefined || c.email === '' ? {} : { email: c.email, email_verified: c.email_verified === true }),
    ...(c.name === undefined || c.name === '' ? {} : { name: c.name }),
    ...(c.groups === undefined || c.groups.length === 0 ? {} : { groups: c.groups }),
    iat,
    exp: iat + ASSERTION_TTL_SECONDS,
    jti: at.jti,
    htm: at.method.toUpperCase(),
    htu: at.htu,
    ...(typeof at.jkt === 'string' ? { cnf: { jkt: at.jkt } } : {}),
  };
}

/**
 * The `aud` of the assertions: `:svc/app-audience`, else the upstream's origin; null without an upstream.
 *
 * @example
 * assertionAudienceOf({ ...DEFAULT_APP_GATEWAY_CONFIG, upstream: 'http://127.0.0.1:3000/' }); // "http://127.0.0.1:3000"
 */
export function assertionAudienceOf(config: Pick<AppGatewayConfig, 'audience' | 'upstream'>): string | null {
  if (config.audience !== null) return config.audience;
  if (config.upstream === null) return null;
  return new URL(config.upstream).origin;
}

/** One key of the assertion key set, as `<control>/assertion-keys.json` holds it. */
export interface AssertionKeyJson {
  /** RFC 7638 thumbprint of the public key. */
  readonly kid: string;
  /** The Ed25519 public key, base64url (the JWK `x`). */
  readonly x: string;
  /** The Ed25519 private key, base64url (the JWK `d`); null once the key can no longer sign. */
  readonly d: string | null;
  /** Published in the JWK Set from this time on (RFC 3339). */
  readonly published_from: string;
  /** Signs from this time on. */
  readonly signs_from: string;
  /** Signs no more from this time (its successor's `signs_from`); null while it has none. */
  readonly signs_until: string | null;
  /** Withdrawn from the JWK Set at this time; null while it signs. */
  readonly published_until: string | null;
}

/** The whole assertion key set. */
export interface AssertionKeySetJson {
  readonly version: 1;
  readonly keys: readonly AssertionKeyJson[];
}

/** A newly generated key: its halves, base64url. */
export interface FreshAssertionKey {
  readonly x: string;
  readonly d: string;
}

/** A public JWK of the set, as `/.svc/jwks.json` serves it. */
export interface AssertionPublicJwk {
  readonly kty: 'OKP';
  readonly crv: 'Ed25519';
  readonly x: string;
  readonly kid: string;
  readonly use: 'sig';
  readonly alg: 'EdDSA';
}

const at = (text: string | null): number => (text === null ? Number.POSITIVE_INFINITY : Date.parse(text));

/**
 * The RFC 7638 JWK thumbprint (SHA-256, base64url) of an Ed25519 public key: its `kid`.
 *
 * @example
 * assertionKeyId('11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo'); // "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
 */
export function assertionKeyId(x: string): string {
  return createHash('sha256').update(`{"crv":"Ed25519","kty":"OKP","x":"${x}"}`).digest('base64url');
}

/**
 * The key that signs at `now`: of the keys whose signing window holds `now`, the one that
 * started last; null when none does (a set whose keys were all withdrawn).
 *
 * @example
 * const key = assertionSigningKey(set, Date.now());
 */
export function assertionSigningKey(set: AssertionKeySetJson, now: number): AssertionKeyJson | null {
  let best: AssertionKeyJson | null = null;
  for (const key of set.keys) {
    if (key.d === null || at(key.signs_from) > now || at(key.signs_until) <= now) continue;
    if (best === null || at(key.signs_from) > at(best.signs_from)) best = key;
  }
  return best;
}

/**
 * {@link assertionSigningKey} at `now`, and until when that answer holds: the first time after
 * `now` at which any key of the set starts or stops signing (`Infinity` when none does), so a
 * caller may keep the answer for every `now` in `[now, until)` of the same set.
 *
 * @example
 * const { key, until } = assertionSigningKeyUntil(set, Date.now());
 */
export function assertionSigningKeyUntil(set: AssertionKeySetJson, now: number): { key: AssertionKeyJson | null; until: number } {
  let until = Number.POSITIVE_INFINITY;
  for (const k of set.keys) {
    for (const t of [at(k.signs_from), at(k.signs_until)]) if (t > now && t < until) until = t;
  }
  return { key: assertionSigningKey(set, now), until };
}

/**
 * The keys published at `now`: every key whose publication window holds it, the next one
 * before it signs and the previous one for its overlap included.
 *
 * @example
 * const jwks = { keys: publishedAssertionKeys(set, Date.now()) };
 */
export function publishedAssertionKeys(set: AssertionKeySetJson, now: number): AssertionPublicJwk[] {
  return set.keys
    .filter((k) => at(k.published_from) <= now && now < at(k.published_until))
    .map((k) => ({ kty: 'OKP', crv: 'Ed25519', x: k.x, kid: k.kid, use: 'sig', alg: 'EdDSA' }));
}

/**
 * The first key set of a node: one key that signs and is published from `now`.
 *
 * @example
 * const set = firstAssertionKeySet(fresh, Date.now());
 */
export function firstAssertionKeySet(fresh: FreshAssertionKey, now: number): AssertionKeySetJson {
  const t = rfc3339(now);
  return {
    version: 1,
    keys: [
      { kid: assertionKeyId(fresh.x), x: fresh.x, d: fresh.d, published_from: t, signs_from: t, signs_until: null, published_until: null },
    ],
  };
}

/** What {@link rotateAssertionKeySet} decided. */
export type AssertionKeyRotation =
  | {
      readonly outcome: 'rotated';
      readonly set: AssertionKeySetJson;
      readonly next: AssertionKeyJson;
      /** The key that signed until this rotation (withdrawn already when `immediate`), or null when none did. */
      readonly previous: AssertionKeyJson | null;
    }
  | { readonly outcome: 'pending'; readonly pending: AssertionKeyJson };

/**
 * A rotation at `now`. Normally the fresh key is published at once and signs only
 * {@link ASSERTION_KEY_PREPUBLISH_SECONDS} later (so verifiers that cached the JWK Set know it
 * before they meet it), and the key signing now stops then and stays published
 * {@link ASSERTION_KEY_OVERLAP_SECONDS} longer (what it signed last still verifies). A rotation
 * while the next key is still waiting to sign changes nothing (`pending`). With `immediate` (a
 * key that leaked), the fresh key signs at once and every other key is withdrawn at once.
 * Keys whose publication ended are dropped, and keys that no longer sign lose their private half.
 *
 * @example
 * const r = rotateAssertionKeySet(set, fresh, Date.now(), { immediate: false });
 * if (r.outcome === 'rotated') save(r.set);
 */
export function rotateAssertionKeySet(
  set: AssertionKeySetJson,
  fresh: FreshAssertionKey,
  now: number,
  opts: { readonly immediate: boolean },
): AssertionKeyRotation {
  const current = assertionSigningKey(set, now);
  if (!opts.immediate) {
    const pending = set.keys.find((k) => k.d !== null && at(k.signs_from) > now);
    if (pending !== undefined) return { outcome: 'pending', pending };
  }
  const t = rfc3339(now);
  // Without a signing key (all withdrawn) there is nothing to overlap with: the fresh key signs now.
  const switchAt = opts.immediate || current === null ? now : now + ASSERTION_KEY_PREPUBLISH_SECONDS * 1000;
  const next: AssertionKeyJson = {
    kid: assertionKeyId(fresh.x),
    x: fresh.x,
    d: fresh.d,
    published_from: t,
    signs_from: rfc3339(switchAt),
    signs_until: null,
    published_until: null,
  };
  const kept = set.keys.map((k): AssertionKeyJson => {
    if (opts.immediate) {
      return {
        ...k,
        d: null,
        signs_until: at(k.signs_until) < now ? k.signs_until : t,
        published_until: at(k.published_until) < now ? k.published_until : t,
      };
    }
    if (k === current) {
      return { ...k, signs_until: rfc3339(switchAt), published_until: rfc3339(switchAt + ASSERTION_KEY_OVERLAP_SECONDS * 1000) };
    }
    return k;
  });
  const pruned = pruneAssertionKeySet({ version: 1, keys: [...kept, next] }, now);
  // The key that signed until this rotation, as the rotation left it: an immediate rotation
  // withdraws it, so it is no longer in the pruned set, but it is still the one it replaced.
  const previous = current === null ? null : (kept.find((k) => k.kid === current.kid) ?? null);
  return { outcome: 'rotated', set: pruned, next, previous };
}

/**
 * The set without what can no longer matter at `now`: keys withdrawn from publication are
 * dropped, and keys past their signing window lose their private half.
 *
 * @example
 * const tidy = pruneAssertionKeySet(set, Date.now());
 */
export function pruneAssertionKeySet(set: AssertionKeySetJson, now: number): AssertionKeySetJson {
  return {
    version: 1,
    keys: set.keys
      .filter((k) => at(k.published_until) > now)
      .map((k) => (k.d !== null && at(k.signs_until) <= now ? { ...k, d: null } : k)),
  };
}

const B64URL_32 = /^[A-Za-z0-9_-]{43}$/;
const TIME_FIELDS = ['published_from', 'signs_from'] as const;
const OPTIONAL_TIME_FIELDS = ['signs_until', 'published_until'] as const;

/**
 * Checks that `value` (the parsed key file) is an assertion key set: version 1, each key with a
 * 32-byte base64url `x`, a matching `kid`, a 32-byte `d` or null, and RFC 3339 times in order.
 *
 * @throws {TypeError} naming the first thing that is wrong.
 * @example
 * const set = parseAssertionKeySet(JSON.parse(readFileSync(file, 'utf8')));
 */
export function parseAssertionKeySet(value: unknown): AssertionKeySetJson {
  const v = value as Partial<AssertionKeySetJson> | null;
  if (typeof v !== 'object' || v === null || v.version !== 1 || !Array.isArray(v.keys)) {
    throw new TypeError('not {"version":1,"keys":[...]}');
  }
  v.keys.forEach((k: Partial<AssertionKeyJson> | null, i) => {
    const where = `keys[${i}]`;
    if (typeof k !== 'object' || k === null) throw new TypeError(`${where} is not an object`);
    if (typeof k.x !== 'string' || !B64URL_32.test(k.x)) throw new TypeError(`${where}.x is not a base64url Ed25519 public key`);
    if (k.kid !== assertionKeyId(k.x)) throw new TypeError(`${where}.kid is not the thumbprint of its key`);
    if (k.d !== null && (typeof k.d !== 'string' || !B64URL_32.test(k.d)))
      throw new TypeError(`${where}.d is neither null nor a base64url private key`);
    for (const f of TIME_FIELDS)
      if (typeof k[f] !== 'string' || Number.isNaN(Date.parse(k[f]))) throw new TypeError(`${where}.${f} is not a time`);
    for (const f of OPTIONAL_TIME_FIELDS) {
      const t = k[f];
      if (t !== null && (typeof t !== 'string' || Number.isNaN(Date.parse(t))))
        throw new TypeError(`${where}.${f} is neither null nor a time`);
    }
  });
  return v as AssertionKeySetJson;
}
