// `@svc/core/config`: reading and validating project configuration (`project.edn`), the one
// settings table (every key with its default, bounds and meaning; the fixed limits), and the module-config reader store addons use.

export type { AppGatewayConfig, AppPathRequirement, AppTlsConfig } from './app-config.js';
export {
  AUDIT_SINK_SETTINGS,
  type AuditSinkSetting,
  type AuditSinks,
  appListenProblem,
  appPathPatternProblem,
  type ConfigField,
  type ConfigFieldValue,
  DEFAULT_AUDIT_SINKS,
  type EdnKeyword,
  type EdnMap,
  type EdnTagged,
  type EdnValue,
  isEdnMap,
  isKeyword,
  isTagged,
  type ModuleConfig,
  type ModuleConfigSchemas,
  type PackagePin,
  type ProjectConfig,
  parseSecretRef,
  readModuleConfig,
  type SecretRef,
  trustedPublishersOf,
  type ValidateOptions,
  validateProjectConfig,
} from './config.js';
export type { AuthSettings } from './deps.js';
export { ConfigError, type ConfigProblem } from './errors.js';
export { cidrPrefixLength, ipVersion, isIpOrCidr } from './ip-address.js';
export {
  PROVIDER_ALIAS,
  PROVIDER_POLICY_SETTINGS,
  type ProviderModuleConfig,
  type ProviderPolicySetting,
  readProviderModuleConfig,
} from './provider-config.js';
export { providerSettingsJson } from './provider-settings.js';
export {
  AUTH_MODULE,
  AUTH_SETTINGS,
  AUTH_STORE_KEY,
  AUTH_STORE_MEANING,
  type AuthSettingSpec,
  BOOTSTRAP_TOKEN_TTL_SECONDS,
  CAPABILITIES,
  type CapabilitySpec,
  DEFAULT_APP_LISTEN,
  DEFAULT_AUTH_SETTINGS,
  DEFAULT_CONTROL_DIR,
  DEFAULT_NODE_LISTEN,
  FIXED_LIMITS,
  type FixedLimit,
  formatLimit,
  MAX_AUTH_AGE_SECONDS_LIMIT,
  MAX_REQUEST_BODY_BYTES,
  PAIRING_MAX_FAILURES,
  PAIRING_MIN_TTL_SECONDS,
  PROJECT_KEYS,
  PROVIDER_CAPABILITY,
  type ProjectKeySpec,
  type ProjectKeyType,
  SENDER_CONSTRAINT_KEY,
  SENDER_CONSTRAINT_MEANING,
  type SettingUnit,
  UNSTRIPPABLE_HEADERS,
  WEAKENING_KEYS,
} from './settings.js';
