export {
  DEFAULT_TIMEOUT_SECONDS,
  DEFAULT_USER_VERIFICATION,
  readWebAuthnConfig,
  type UserVerification,
  type WebAuthnConfig,
} from './config.js';
export { createWebAuthnProvider, type WebAuthnProviderOptions, WebAuthnRefusal, webauthnProvider } from './webauthn-provider.js';
