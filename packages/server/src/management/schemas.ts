/**
 * The management API's wire shapes are declared once, in core (`@svc/core`, `wire/management`),
 * as JSON schemas with their TypeScript types derived from them, so the client SDK uses the
 * same declarations; the routes import them from here. What follows them is what only the
 * server's OpenAPI document says.
 */
export {
  type AuditCheckpointsQuery,
  type AuditQuery,
  auditCheckpointsQuery,
  auditCheckpointsResponse,
  auditPageResponse,
  auditQuery,
  type DeviceParams,
  deviceListResponse,
  deviceParams,
  deviceRemovedResponse,
  deviceResponse,
  type EnrollBody,
  emptyBody,
  enrollBody,
  healthResponse,
  noQuery,
  type RealmQuery,
  realmQuery,
  revokeOthersResponse,
  sessionListResponse,
} from '@svc/core';

/** The status of the management API's DNS-rebinding guard (`403 forbidden_host`), on every route. */
export const LOOPBACK_GUARD = 403;
/** The bearer-token security requirement of the OpenAPI document. */
export const MANAGEMENT_BEARER = [{ managementBearer: [] }];
