// `@svc/core/config`: reading and validating project configuration (`project.edn`): the EDN
// model a parser hands over, the validator and the configuration it returns, the readers of
// single keys (audit sinks, the application gateway, trusted publishers, a module's `:config`
// and its secret references, a provider module's settings), and the error they report with.
// The settings table they read (every key's default, bounds and meaning) is `@svc/core/settings`.

export type { AppBrandConfig, AppGatewayConfig, AppPathRequirement, AppTlsConfig } from './app-config.js';
export { APP_BRAND_LOGO_MAX_BYTES, type AssetReader, contrastWithWhite } from './app-config-reader.js';
export { type AppRoute, type AppRouteTable, appRouteTable, parseRouteFrom, requestOrigin } from './app-routes.js';
export { AUDIT_SINK_SETTINGS, type AuditSinkSetting, type AuditSinks } from './audit-sinks-config.js';
export { type ModuleConfig, type PackagePin, type ProjectConfig, type ValidateOptions, validateProjectConfig } from './config.js';
export { type EdnKeyword, type EdnMap, type EdnTagged, type EdnValue, isEdnMap, isKeyword, isTagged } from './edn-model.js';
export { ConfigError, type ConfigProblem } from './errors.js';
export {
  type ConfigField,
  type ConfigFieldValue,
  type ModuleConfigSchemas,
  parseSecretRef,
  readModuleConfig,
  type SecretRef,
} from './module-config.js';
export { PROVIDER_POLICY_SETTINGS, type ProviderModuleConfig, type ProviderPolicySetting } from './provider-config.js';
export { providerSettingsJson } from './provider-settings.js';
export { trustedPublishersOf } from './trusted-publishers.js';
