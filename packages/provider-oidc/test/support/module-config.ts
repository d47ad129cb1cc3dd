// Turns a provider module's `:config` as written in project.edn into the JSON the provider
// receives, as the service does (docs/providers.md section 2): keyword keys without the colon,
// every `#svc/secret` reference resolved by the CLI's own helper (env: or a file).

import { resolveSecret } from '@svc/cli';
import type { ProviderJson } from '@svc/core';
import { type ConfigProblem, type EdnValue, isEdnMap, isKeyword, isTagged, parseSecretRef } from '@svc/core/config';

function toJson(v: EdnValue, env: NodeJS.ProcessEnv, key: string, problems: ConfigProblem[]): ProviderJson {
  if (isTagged(v)) {
    const ref = parseSecretRef(v, problems, 'project.edn', key);
    return ref === null ? null : resolveSecret(ref, env);
  }
  if (isKeyword(v)) return v.keyword;
  if (Array.isArray(v)) return v.map((x: EdnValue) => toJson(x, env, key, problems));
  if (isEdnMap(v)) return Object.fromEntries([...v].map(([k, x]) => [k.replace(/^:/, ''), toJson(x, env, `${key} ${k}`, problems)]));
  if (typeof v === 'bigint') return Number(v);
  return v as ProviderJson;
}

/**
 * The provider config of the module `:config` map `config` (parsed EDN), secrets resolved in `env`.
 *
 * @example
 * const json = providerConfigOf(parseEdn(text, 'project.edn').value, { OIDC_CLIENT_SECRET: 's3cret' });
 */
export function providerConfigOf(config: EdnValue | undefined, env: NodeJS.ProcessEnv): ProviderJson {
  if (config === undefined || !isEdnMap(config)) throw new TypeError('the module :config is not a map');
  const problems: ConfigProblem[] = [];
  const json = toJson(config, env, ':config', problems);
  if (problems.length > 0) throw new TypeError(problems.map((p) => `${p.key}: ${p.message}`).join('; '));
  return json;
}
