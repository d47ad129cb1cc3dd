import { parsePublicKeyHex } from './ed25519.js';
import { describeEdn as describe, type EdnMap, type EdnValue, isEdnMap, mergeEdn } from './edn-model.js';
import { ConfigError, type ConfigProblem } from './errors.js';

// `:svc/trusted-publishers`: the publishers whose signature a provider package must carry.
// Read with the rest of `project.edn`, and alone by `svc package install` before the module
// that activates the package can be valid.

/** A publisher name of `:svc/trusted-publishers`: what install and audit name the signer by. */
const PUBLISHER_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/**
 * Reads `:svc/trusted-publishers` (name → 64 hex Ed25519 public key), reporting every problem through `bad`.
 *
 * @example
 * const trusted = readTrustedPublishers(merged.get(':svc/trusted-publishers'), bad); // { svc: 'ab12…' }
 */
export function readTrustedPublishers(v: EdnValue | undefined, bad: (key: string, message: string) => void): Record<string, string> {
  const out: Record<string, string> = {};
  if (v === undefined) return out;
  if (!isEdnMap(v)) {
    bad(':svc/trusted-publishers', `expected a map of publisher name to Ed25519 public key (64 hex digits), found ${describe(v)}`);
    return out;
  }
  for (const [name, key] of v) {
    const at = `:svc/trusted-publishers ${name.startsWith(':') ? name : JSON.stringify(name)}`;
    if (!PUBLISHER_NAME.test(name)) {
      bad(at, 'publisher names are strings of letters, digits, ".", "_" and "-", e.g. "svc"');
      continue;
    }
    let hex: string;
    try {
      hex = parsePublicKeyHex(key);
    } catch (error) {
      bad(at, `expected the publisher's Ed25519 public key as 64 hex digits, found ${describe(key)} (${(error as Error).message})`);
      continue;
    }
    const twin = Object.entries(out).find(([, k]) => k === hex);
    if (twin !== undefined) bad(at, `the same key is already trusted as "${twin[0]}"; name each publisher once`);
    else out[name] = hex;
  }
  return out;
}

/**
 * The trusted publishers of a parsed `project.edn` (the chosen profile merged over the base),
 * without validating the rest of the file: what `svc package install` checks a provider
 * package's signature against before the package is pinned (and before the module that will
 * activate it can be valid). Throws a {@link ConfigError} naming the file and key of a bad entry.
 *
 * @example
 * const trusted = trustedPublishersOf(parseEdn(text), { file, profile: null }); // { svc: 'ab12…' }
 */
export function trustedPublishersOf(
  root: EdnValue,
  opts: { readonly file: string; readonly profile?: string | null },
): Readonly<Record<string, string>> {
  const problems: ConfigProblem[] = [];
  const bad = (key: string, message: string) => problems.push({ file: opts.file, key, message });
  if (!isEdnMap(root)) throw new ConfigError([{ file: opts.file, key: '(top level)', message: `expected a map, found ${describe(root)}` }]);
  let merged: EdnMap = root;
  const profile = opts.profile ?? null;
  if (profile !== null) {
    const body = (root.get(':svc/profiles') as EdnMap | undefined)?.get?.(`:${profile}`);
    if (!isEdnMap(body)) throw new ConfigError([{ file: opts.file, key: ':svc/profiles', message: `profile :${profile} is not defined` }]);
    merged = mergeEdn(root, body) as EdnMap;
  }
  const out = readTrustedPublishers(merged.get(':svc/trusted-publishers'), bad);
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(out);
}
