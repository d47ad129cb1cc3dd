import type { ProviderBeginResult, ProviderFinishResult, ProviderHealth, ProviderJson } from '@svc/core';

/** Shape bounds of the claims an answer may carry (core's `checkProviderIdentity` is stricter on what they mean). */
const MAX_PROVIDER_CLAIMS = 32;
const MAX_PROVIDER_CLAIM_CHARS = 1024;
/** A groups claim may be long: the whole claims object, as JSON, is held to 16 KiB. */
const MAX_PROVIDER_CLAIMS_BYTES = 16 * 1024;
/** The most items of an array claim (a groups claim). */
const MAX_PROVIDER_CLAIM_ITEMS = 200;

// The shape of every answer a confined provider gives, checked where it crosses the process
// boundary and before anything of the service sees it. Exact: a key the contract does not name
// (`principal`, `session`, `access_token`, `realm`) is refused, not ignored, so a provider
// cannot smuggle anything past a caller that spreads or stores the answer. What the identity
// MEANS (issuer allowed, realm, subject format) is core's `checkProviderIdentity`.

/** The bounds of an answer. */
export const ANSWER_LIMITS = Object.freeze({
  /** `begin`'s state, as JSON (kept by the service, single use). */
  stateBytes: 16 * 1024,
  /** A JSON reply's body, as JSON (sent to the browser). */
  replyBodyBytes: 64 * 1024,
  /** A redirect location. */
  locationChars: 4096,
  /** An issuer and an external subject (core then holds the subject to 255 printable characters). */
  issuerChars: 1024,
  subjectChars: 1024,
  /** A credential id (a WebAuthn id is at most 1023 bytes, base64url). */
  credentialIdChars: 1400,
  /** A credential's own data (public key, transports...), as JSON. */
  credentialDataBytes: 16 * 1024,
  /** A health answer's detail (it goes to the log only). */
  healthDetailChars: 500,
  /** How deep any JSON value of an answer may nest. */
  jsonDepth: 32,
});

type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly problem: string };
const ok = <T>(value: T): Checked<T> => ({ ok: true, value });
const bad = <T>(problem: string): Checked<T> => ({ ok: false, problem });

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Why `value`'s keys are not exactly `required` (plus any of `optional`), or null. */
function keysProblem(
  what: string,
  value: Record<string, unknown>,
  required: readonly string[],
  optional: readonly string[] = [],
): string | null {
  for (const key of Object.keys(value)) {
    if (!required.includes(key) && !optional.includes(key))
      return `${what} has the field ${JSON.stringify(key.slice(0, 64))}, which the contract does not allow`;
  }
  for (const key of required) if (!Object.hasOwn(value, key)) return `${what} lacks the field ${key}`;
  return null;
}

const hasControl = (s: string): boolean => /\p{Cc}/u.test(s);

function boundedString(what: string, value: unknown, maxChars: number): string | null {
  if (typeof value !== 'string') return `${what} is not a string`;
  if (value.length === 0) return `${what} is empty`;
  if (value.length > maxChars) return `${what} is over ${maxChars} characters`;
  if (hasControl(value)) return `${what} contains a control character`;
  return null;
}

/** Why `value` is not JSON of at most `maxBytes` nesting at most {@link ANSWER_LIMITS.jsonDepth}, or null. */
function jsonProblem(what: string, value: unknown, maxBytes: number): string | null {
  const walk = (v: unknown, depth: number): string | null => {
    if (depth > ANSWER_LIMITS.jsonDepth) return `${what} nests deeper than ${ANSWER_LIMITS.jsonDepth}`;
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return null;
    if (typeof v === 'number') return Number.isFinite(v) ? null : `${what} holds a number that is not finite`;
    if (Array.isArray(v)) {
      for (const item of v) {
        const p = walk(item, depth + 1);
        if (p !== null) return p;
      }
      return null;
    }
    if (isPlainObject(v)) {
      for (const item of Object.values(v)) {
        const p = walk(item, depth + 1);
        if (p !== null) return p;
      }
      return null;
    }
    return `${what} is not JSON`;
  };
  const p = walk(value, 0);
  if (p !== null) return p;
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  return bytes > maxBytes ? `${what} is ${bytes} bytes as JSON (at most ${maxBytes})` : null;
}

/**
 * Checks `begin`'s answer: exactly `{state, reply}`, the state JSON of at most 16 KiB, the
 * reply exactly `{kind: "json", body}` (body at most 64 KiB) or `{kind: "redirect", location}`
 * with an absolute `http:` or `https:` URL without credentials.
 *
 * @example
 * const checked = checkBeginAnswer(answer);
 * if (!checked.ok) throw new Error(checked.problem);
 */
export function checkBeginAnswer(value: unknown): Checked<ProviderBeginResult> {
  if (!isPlainObject(value)) return bad('the answer is not an object');
  const keys = keysProblem('the answer', value, ['state', 'reply']);
  if (keys !== null) return bad(keys);
  const state = jsonProblem('the state', value.state, ANSWER_LIMITS.stateBytes);
  if (state !== null) return bad(state);
  const reply = value.reply;
  if (!isPlainObject(reply)) return bad('the reply is not an object');
  if (reply.kind === 'json') {
    const k = keysProblem('the reply', reply, ['kind', 'body']);
    if (k !== null) return bad(k);
    const body = jsonProblem('the reply body', reply.body, ANSWER_LIMITS.replyBodyBytes);
    if (body !== null) return bad(body);
    return ok({ state: value.state as ProviderJson, reply: { kind: 'json', body: reply.body as ProviderJson } });
  }
  if (reply.kind === 'redirect') {
    const k = keysProblem('the reply', reply, ['kind', 'location']);
    if (k !== null) return bad(k);
    const where = boundedString('the redirect location', reply.location, ANSWER_LIMITS.locationChars);
    if (where !== null) return bad(where);
    const location = reply.location as string;
    let url: URL;
    try {
      url = new URL(location);
    } catch {
      return bad('the redirect location is not an absolute URL');
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:')
      return bad(`the redirect location's scheme ${url.protocol} is not http or https`);
    if (url.username !== '' || url.password !== '') return bad('the redirect location carries credentials');
    return ok({ state: value.state as ProviderJson, reply: { kind: 'redirect', location } });
  }
  return bad('the reply kind is neither json nor redirect');
}

/**
 * Checks `credentialIdOf`'s answer: null, or a credential id of 1 to 1400 characters without
 * control characters.
 *
 * @example
 * const checked = checkCredentialIdAnswer(answer);
 */
export function checkCredentialIdAnswer(value: unknown): Checked<string | null> {
  if (value === null) return ok(null);
  const p = boundedString('the credential id', value, ANSWER_LIMITS.credentialIdChars);
  return p === null ? ok(value as string) : bad(p);
}

function claimsShapeProblem(claims: unknown): string | null {
  if (!isPlainObject(claims)) return 'the claims are not an object';
  const entries = Object.entries(claims);
  if (entries.length > MAX_PROVIDER_CLAIMS) return `there are ${entries.length} claims (at most ${MAX_PROVIDER_CLAIMS})`;
  for (const [name, v] of entries) {
    if (name.length === 0 || name.length > 64) return 'a claim name is empty or over 64 characters';
    if (typeof v === 'boolean') continue;
    if (Array.isArray(v)) {
      if (v.length > MAX_PROVIDER_CLAIM_ITEMS) return `the claim ${JSON.stringify(name)} has over ${MAX_PROVIDER_CLAIM_ITEMS} items`;
      if (v.every((item: unknown) => typeof item === 'string' && item.length <= MAX_PROVIDER_CLAIM_CHARS)) continue;
      return `the claim ${JSON.stringify(name)} is an array that is not of strings of at most ${MAX_PROVIDER_CLAIM_CHARS} characters`;
    }
    if (typeof v !== 'string') return `the claim ${JSON.stringify(name)} is neither a string, a boolean nor an array of strings`;
    if (v.length > MAX_PROVIDER_CLAIM_CHARS) return `the claim ${JSON.stringify(name)} is over ${MAX_PROVIDER_CLAIM_CHARS} characters`;
  }
  const bytes = Buffer.byteLength(JSON.stringify(claims), 'utf8');
  return bytes > MAX_PROVIDER_CLAIMS_BYTES ? `the claims are ${bytes} bytes as JSON (at most ${MAX_PROVIDER_CLAIMS_BYTES})` : null;
}

/**
 * Checks `finish`'s answer: exactly `{identity, credential}`; the identity exactly
 * `{issuer, subject, claims}` (non-empty bounded strings; at most 32 string, boolean or
 * string-array claims, 16 KiB); the credential null or exactly `{id, data, counter}` (a bounded id, JSON data of at
 * most 16 KiB, a counter that is null or a non-negative safe integer). Anything else, such as
 * a `principal`, a `session` or an `access_token` beside them, is refused.
 *
 * @example
 * const checked = checkFinishAnswer(answer);
 * if (checked.ok) use(checked.value.identity);
 */
export function checkFinishAnswer(value: unknown): Checked<ProviderFinishResult> {
  if (!isPlainObject(value)) return bad('the answer is not an object');
  const keys = keysProblem('the answer', value, ['identity', 'credential']);
  if (keys !== null) return bad(keys);
  const identity = value.identity;
  if (!isPlainObject(identity)) return bad('the identity is not an object');
  const idKeys = keysProblem('the identity', identity, ['issuer', 'subject', 'claims']);
  if (idKeys !== null) return bad(idKeys);
  const issuer = boundedString('the issuer', identity.issuer, ANSWER_LIMITS.issuerChars);
  if (issuer !== null) return bad(issuer);
  const subject = boundedString('the subject', identity.subject, ANSWER_LIMITS.subjectChars);
  if (subject !== null) return bad(subject);
  const claims = claimsShapeProblem(identity.claims);
  if (claims !== null) return bad(claims);
  const checkedIdentity = {
    issuer: identity.issuer as string,
    subject: identity.subject as string,
    claims: { ...(identity.claims as Record<string, string | boolean | readonly string[]>) },
  };
  const credential = value.credential;
  if (credential === null) return ok({ identity: checkedIdentity, credential: null });
  if (!isPlainObject(credential)) return bad('the credential is neither null nor an object');
  const credKeys = keysProblem('the credential', credential, ['id', 'data', 'counter']);
  if (credKeys !== null) return bad(credKeys);
  const id = boundedString('the credential id', credential.id, ANSWER_LIMITS.credentialIdChars);
  if (id !== null) return bad(id);
  const data = jsonProblem('the credential data', credential.data, ANSWER_LIMITS.credentialDataBytes);
  if (data !== null) return bad(data);
  const counter = credential.counter;
  if (counter !== null && !(typeof counter === 'number' && Number.isSafeInteger(counter) && counter >= 0)) {
    return bad('the credential counter is neither null nor a non-negative safe integer');
  }
  return ok({
    identity: checkedIdentity,
    credential: { id: credential.id as string, data: credential.data as ProviderJson, counter: counter as number | null },
  });
}

/**
 * Checks `health`'s answer: exactly `{status}` or `{status, detail}`, the status `ok`,
 * `degraded` or `down`, the detail a string of at most 500 characters.
 *
 * @example
 * const checked = checkHealthAnswer(answer);
 */
export function checkHealthAnswer(value: unknown): Checked<ProviderHealth> {
  if (!isPlainObject(value)) return bad('the answer is not an object');
  const keys = keysProblem('the answer', value, ['status'], ['detail']);
  if (keys !== null) return bad(keys);
  if (value.status !== 'ok' && value.status !== 'degraded' && value.status !== 'down') return bad('the status is not ok, degraded or down');
  if (value.detail === undefined) return ok({ status: value.status });
  if (typeof value.detail !== 'string' || value.detail.length > ANSWER_LIMITS.healthDetailChars || hasControl(value.detail)) {
    return bad(`the detail is not a string of at most ${ANSWER_LIMITS.healthDetailChars} printable characters`);
  }
  return ok({ status: value.status, detail: value.detail });
}
