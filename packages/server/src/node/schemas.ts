/**
 * The node surface's wire shapes are declared once, in core (`@svc/core`, `wire/node`), as
 * JSON schemas with their TypeScript types derived from them, so the client SDK uses the same
 * declarations; the routes import them from here. What follows them is what only the server's
 * OpenAPI document says.
 */
export {
  type CompleteBody,
  completeBody,
  type DiagnosticsBody,
  diagnosticsBody,
  discoveryResponse,
  nodeHealthResponse,
  nodeStatusResponse,
  type PrepareBody,
  pairedDeviceResponse,
  prepareBody,
  preparedPairingResponse,
  signedDiagnosticsResponse,
} from '@svc/core';

/** The bearer-token security requirement of the OpenAPI document. */
export const MANAGEMENT_BEARER = [{ managementBearer: [] }];
