import type { AuthProvider } from '@svc/core';
import { createOidcProvider } from './oidc-provider.js';

export { DEFAULT_SCOPES, isLoopbackHost, type OidcConfig, parseOidcConfig, type TokenEndpointAuth } from './config.js';
export { OidcRefusal, type OidcRefusalCode } from './errors.js';
export { createOidcProvider, type OidcProviderOptions } from './oidc-provider.js';

/**
 * The package's `svc/auth-provider` export (named in `svc-addon.json`): the OIDC login
 * provider with the service's defaults.
 *
 * @example
 * const problems = svcAuthProvider.validateConfig({ 'oidc/issuer': 'https://login.example.com', 'oidc/client-id': 'svc', 'oidc/client-secret': secret });
 */
export const svcAuthProvider: AuthProvider = createOidcProvider();
