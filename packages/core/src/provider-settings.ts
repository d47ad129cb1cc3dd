import { type EdnMap, type EdnValue, isEdnMap, isKeyword, isTagged } from './edn-model.js';
import type { ConfigProblem } from './errors.js';
import { parseSecretRef, type SecretRef } from './module-config.js';
import type { ProviderJson } from './provider.js';

/**
 * A provider module's settings as the JSON its provider receives (`AuthProvider`'s `config`):
 * keyword keys without the colon (`:oidc/issuer` → `"oidc/issuer"`), string keys as written,
 * keyword values as their name, vectors as arrays, and every `#svc/secret` reference replaced
 * by what `resolveSecret` returns for it. Anything JSON cannot carry (a big integer beyond
 * 2^53, another tag, two keys that would collide) is a TypeError: validation refuses those
 * before this runs.
 *
 * @example
 * const json = providerSettingsJson(provider.settings, (ref) => readSecret(ref));
 * // { "oidc/issuer": "https://login.example.com", "oidc/client-secret": "<resolved>" }
 */
export function providerSettingsJson(settings: EdnMap, resolveSecret: (ref: SecretRef) => string): ProviderJson {
  const convert = (v: EdnValue, at: string): ProviderJson => {
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new TypeError(`${at}: ${v} is not a JSON number`);
      return v;
    }
    if (typeof v === 'bigint') {
      if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER))
        throw new TypeError(`${at}: ${v} is too large for JSON`);
      return Number(v);
    }
    if (Array.isArray(v)) return v.map((x: EdnValue, i: number) => convert(x, `${at} [${i}]`));
    if (isEdnMap(v)) {
      const out: Record<string, ProviderJson> = {};
      for (const [k, x] of v) {
        const name = k.startsWith(':') ? k.slice(1) : k;
        if (Object.hasOwn(out, name)) throw new TypeError(`${at}: the keys ${k} and ${name} would collide in JSON`);
        out[name] = convert(x, `${at} ${k}`);
      }
      return out;
    }
    if (isKeyword(v)) return v.keyword;
    if (isTagged(v) && v.tag === 'svc/secret') {
      const problems: ConfigProblem[] = [];
      const ref = parseSecretRef(v, problems, '', at);
      if (ref === null) throw new TypeError(`${at}: ${problems[0]?.message ?? 'not a secret reference'}`);
      return resolveSecret(ref);
    }
    throw new TypeError(`${at}: #${(v as { tag: string }).tag} cannot be sent to a provider`);
  };
  return convert(settings, '(settings)');
}
