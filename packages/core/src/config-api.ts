// `@svc/core/config`: reading and validating project configuration (`svc.edn`), the settings
// table with its defaults, and the module-config reader store addons use.

export {
  AUTH_SETTINGS,
  type ConfigField,
  type ConfigFieldValue,
  type EdnKeyword,
  type EdnMap,
  type EdnTagged,
  type EdnValue,
  isEdnMap,
  isKeyword,
  isTagged,
  type ModuleConfig,
  type PackagePin,
  type ProjectConfig,
  parseSecretRef,
  readModuleConfig,
  type SecretRef,
  validateProjectConfig,
} from './config.js';
export { type AuthSettings, DEFAULT_AUTH_SETTINGS } from './deps.js';
export { ConfigError, type ConfigProblem } from './errors.js';
