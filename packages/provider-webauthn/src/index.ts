export {
  DEFAULT_TIMEOUT_SECONDS,
  DEFAULT_USER_VERIFICATION,
  readWebAuthnConfig,
  type UserVerification,
  type WebAuthnConfig,
} from './config.js';
export {
  createWebAuthnProvider,
  refusalReason,
  type WebAuthnProviderOptions,
  type WebAuthnRefusal,
  type WebAuthnRefusalReason,
  webauthnProvider,
} from './webauthn-provider.js';
