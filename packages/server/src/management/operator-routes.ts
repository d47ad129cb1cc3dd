import { AuthError, auditEventToJson, deviceToJson, type Principal, removeDevice, revokeOtherSessions, sessionToJson } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { principalOf, requireManagementPrincipal } from '../http/principal.js';
import { documented, problemResponses } from '../http/problem-schema.js';
import type { OperatorRouteOptions } from './route-options.js';
import {
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
  emptyBody,
  LOOPBACK_GUARD,
  MANAGEMENT_BEARER,
  type RealmQuery,
  realmQuery,
  revokeOthersResponse,
  sessionListResponse,
} from './schemas.js';

/**
 * The listing filter of a `realm`/`mine` query: with `mine`, the caller's own subject in the
 * caller's own realm (a `realm` naming another realm is refused rather than silently ignored).
 */
function listingFilter(query: RealmQuery, principal: Principal): { realm?: Principal['realm']; subject?: string } {
  if (query.mine === undefined) return query.realm === undefined ? {} : { realm: query.realm };
  if (query.realm !== undefined && query.realm !== principal.realm) {
    throw new AuthError('invalid_request', `mine lists the caller's own realm (${principal.realm}); drop realm or mine`);
  }
  return { realm: principal.realm, subject: principal.subject };
}

/** The most audit events one page returns. */
export const AUDIT_PAGE_MAX = 1000;
/** The audit page size when `limit` is not given. */
export const AUDIT_PAGE_DEFAULT = 100;

/** The most checkpoints one review lists. */
export const CHECKPOINTS_MAX = 200;
/** How many checkpoints a review lists when `limit` is not given. */
export const CHECKPOINTS_DEFAULT = 20;

/**
 * Operator routes beyond the contract table, all behind a management bearer token: read the
 * audit chain page by page, review the exported signed checkpoints, list and remove devices, list active sessions (all of them, or with
 * `?mine` the caller's own), and sign the caller out of its other sessions.
 *
 * @example
 * await app.register(operatorRoutes, { deps });
 */
export const operatorRoutes: FastifyPluginAsync<OperatorRouteOptions> = async (app, { deps, auditCheckpoints }) => {
  app.addHook('onRequest', requireManagementPrincipal(deps));

  app.get<{ Querystring: AuditQuery }>(
    '/v1/auth/audit',
    {
      schema: documented({
        summary: 'Read the audit chain, one page after a sequence number',
        security: MANAGEMENT_BEARER,
        querystring: auditQuery,
        response: { 200: { description: 'A page of audit events', ...auditPageResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    async (req) => {
      const afterSeq = req.query.after === undefined ? 0 : Number(req.query.after);
      const limit = req.query.limit === undefined ? AUDIT_PAGE_DEFAULT : Number(req.query.limit);
      if (limit > AUDIT_PAGE_MAX) throw new AuthError('invalid_request', `limit must be from 1 to ${AUDIT_PAGE_MAX}`);
      // One extra event tells whether another page exists.
      const events = await deps.store.listAuditEvents({ afterSeq, limit: limit + 1 });
      const page = events.length > limit ? events.slice(0, limit) : events;
      const last = page.at(-1);
      return { events: page.map(auditEventToJson), next_after: events.length > limit && last !== undefined ? last.seq : null };
    },
  );

  app.get<{ Querystring: AuditCheckpointsQuery }>(
    '/v1/auth/audit/checkpoints',
    {
      schema: documented({
        summary:
          'Review the signed audit checkpoints this service exports, newest first, each checked against the chain and the node key history',
        security: MANAGEMENT_BEARER,
        querystring: auditCheckpointsQuery,
        response: {
          200: { description: 'The latest checkpoints with their verdicts', ...auditCheckpointsResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 503),
        },
      }),
    },
    async (req) => {
      const latest = req.query.limit === undefined ? CHECKPOINTS_DEFAULT : Number(req.query.limit);
      if (latest > CHECKPOINTS_MAX) throw new AuthError('invalid_request', `limit must be from 1 to ${CHECKPOINTS_MAX}`);
      return auditCheckpoints === undefined ? { exported: false, total: 0, failed: 0, checkpoints: [] } : auditCheckpoints(latest);
    },
  );

  app.get<{ Querystring: RealmQuery }>(
    '/v1/auth/devices',
    {
      schema: documented({
        summary: "List the enrolled devices (with ?mine, the caller's own)",
        security: MANAGEMENT_BEARER,
        querystring: realmQuery,
        response: { 200: { description: 'The enrolled devices', ...deviceListResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    async (req) => {
      const devices = await deps.store.listDevices(listingFilter(req.query, principalOf(req)));
      return { devices: devices.map(deviceToJson) };
    },
  );

  app.delete<{ Params: DeviceParams }>(
    '/v1/auth/devices/:id',
    {
      schema: documented({
        summary: 'Remove a device and revoke its sessions',
        security: MANAGEMENT_BEARER,
        params: deviceParams,
        response: {
          200: { description: 'The device was removed', ...deviceRemovedResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 404, 503),
        },
      }),
    },
    async (req) => {
      return removeDevice(deps, { principal: principalOf(req), deviceId: req.params.id });
    },
  );

  app.get<{ Querystring: RealmQuery }>(
    '/v1/auth/sessions',
    {
      schema: documented({
        summary: "List the active sessions (with ?mine, the caller's own)",
        security: MANAGEMENT_BEARER,
        querystring: realmQuery,
        response: { 200: { description: 'The active sessions', ...sessionListResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    async (req) => {
      const now = deps.clock.now();
      const sessions = await deps.store.listActiveSessions({ now, ...listingFilter(req.query, principalOf(req)) });
      return { sessions: sessions.map(sessionToJson) };
    },
  );

  app.post(
    '/v1/auth/sessions/revoke-others',
    {
      schema: documented({
        summary: "Revoke the caller's other sessions (sign out everywhere else)",
        security: MANAGEMENT_BEARER,
        body: emptyBody,
        response: {
          200: { description: 'The sessions revoked, newest first', ...revokeOthersResponse },
          ...problemResponses(LOOPBACK_GUARD, 401, 503),
        },
      }),
    },
    async (req) => revokeOtherSessions(deps, { principal: principalOf(req) }),
  );
};
