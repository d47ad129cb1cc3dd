import {
  type AuthDeps,
  AuthError,
  authenticateScimToken,
  SCIM_BASE_PATH,
  ScimError,
  scimCreateGroup,
  scimCreateUser,
  scimDeleteGroup,
  scimDeleteUser,
  scimErrorJson,
  scimErrorOf,
  scimGetGroup,
  scimGetUser,
  scimGroup,
  scimGroupMembers,
  scimGroupRefs,
  scimListFilter,
  scimListGroups,
  scimListResponse,
  scimListUsers,
  scimPage,
  scimPatchGroup,
  scimPatchUser,
  scimReplaceGroup,
  scimReplaceUser,
  scimResourceTypes,
  scimSchemas,
  scimServiceProviderConfig,
  scimUser,
} from '@svc/core';
import type { GroupRecord, ScimTokenRecord, UserRecord } from '@svc/core/store';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { toAuthError } from '../http/error-handling.js';
import { clientAddressKey, type FailureLimiter } from '../http/failure-limiter.js';
import { BODY_LIMIT } from '../http/json-body.js';
import { applySecurityHeaders } from '../http/security-headers.js';
import { gatewayOriginOf } from './browser-session.js';

/** The media type of SCIM bodies (RFC 7644 §3.1); `application/json` is accepted too. */
export const SCIM_CONTENT_TYPE = 'application/scim+json';

/** The `WWW-Authenticate` of a refused SCIM request. */
export const SCIM_BEARER_CHALLENGE = 'Bearer realm="scim", error="invalid_token"';

/** What the SCIM routes need. */
export interface ScimRouteOptions {
  readonly deps: AuthDeps;
  /** The gateway's configured public origin (`:svc/app-public-origin`), for `meta.location`. */
  readonly publicOrigin: string | undefined;
  /** The budget of refused SCIM tokens per client address unit: beyond it, a refusal is `429` (a valid token always goes through). */
  readonly limiter: FailureLimiter;
}

/** The SCIM token each request authenticated with (set by the auth hook, before any handler). */
const tokens = new WeakMap<FastifyRequest, ScimTokenRecord>();

function tokenOf(req: FastifyRequest): ScimTokenRecord {
  const token = tokens.get(req);
  if (token === undefined) throw new TypeError('a SCIM route ran without its token');
  return token;
}

/** Whether a `Content-Type` is SCIM JSON in UTF-8 (no parameter but the charset). */
function isScimContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const parts = value.toLowerCase().split(';');
  if (parts[0]?.trim() !== SCIM_CONTENT_TYPE) return false;
  return parts.slice(1).every((p) => ['charset=utf-8', 'charset="utf-8"'].includes(p.trim()));
}

function send(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply.code(status).type(SCIM_CONTENT_TYPE).send(JSON.stringify(body));
}

/** The attributes a query excludes (`excludedAttributes=members`), lower-cased. */
function excluded(query: { readonly excludedAttributes?: unknown }): Set<string> {
  const v = query.excludedAttributes;
  return new Set(typeof v === 'string' ? v.split(',').map((a) => a.trim().toLowerCase()) : []);
}

type IdParams = { readonly id: string };
type ListQuery = {
  readonly filter?: unknown;
  readonly startIndex?: unknown;
  readonly count?: unknown;
  readonly excludedAttributes?: unknown;
};

/**
 * The SCIM 2.0 service (RFC 7643/7644) under `/.svc/scim/v2` on the gateway (docs/scim.md):
 * a company directory provisions the application realm's users and groups. Authorised only by
 * a live SCIM token (`Authorization: Bearer svcs_...`): anything else is `401` with a SCIM
 * error body (refused tokens are counted per client address unit: beyond the budget, `429`). Bodies are `application/scim+json` (or `application/json`), errors RFC 7644
 * §3.12 bodies; the mapping rules are core's (`scim.ts`), the changes core's use cases.
 *
 * @example
 * await app.register(scimRoutes, { prefix: SCIM_BASE_PATH, deps, publicOrigin });
 */
export const scimRoutes: FastifyPluginAsync<ScimRouteOptions> = async (app, { deps, publicOrigin, limiter }) => {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser(SCIM_CONTENT_TYPE, { parseAs: 'string', bodyLimit: BODY_LIMIT }, (req, body, done) => {
    if (!isScimContentType(req.headers['content-type'])) {
      done(new ScimError('unsupported_media_type', null, `bodies must be ${SCIM_CONTENT_TYPE} or application/json in UTF-8`), undefined);
      return;
    }
    parseJson(req, typeof body === 'string' ? body : body.toString('utf8'), done);
  });

  app.setErrorHandler((err, req, reply) => {
    const refusal = toAuthError(err);
    // Fastify's own refusal of a body (malformed JSON, a __proto__ key) is a syntax error to SCIM.
    const scim =
      !(err instanceof AuthError) && refusal.code === 'invalid_request'
        ? new ScimError('invalid_request', 'invalidSyntax', refusal.detail)
        : scimErrorOf(refusal);
    if (scim.status >= 500) req.log.error({ err }, 'SCIM request failed');
    else req.log.info({ status: scim.status, scim_type: scim.scimType }, 'SCIM request refused');
    applySecurityHeaders(reply);
    reply.headers(refusal.headers);
    if (scim.status === 401) reply.header('www-authenticate', SCIM_BEARER_CHALLENGE);
    return send(reply, scim.status, scimErrorJson(scim));
  });

  app.addHook('onRequest', async (req) => {
    try {
      tokens.set(req, await authenticateScimToken(deps, req.headers.authorization));
    } catch (err) {
      // Refused tokens are counted per address unit; beyond the budget the refusal is a 429, so a
      // guesser learns nothing more. A valid token is never refused for another's failures (the
      // token lookup is a read: a refused one wrote nothing). A client already over budget in
      // this process is answered 429 before the shared budget is even reserved.
      if (err instanceof AuthError && err.status === 401) {
        const key = clientAddressKey(req.ip);
        const over = limiter.check([key]);
        if (over !== null) throw over;
        const attempt = await limiter.reserve([key]);
        if (!attempt.counted) throw attempt.refusal();
        attempt.fail();
      }
      throw err;
    }
  });

  const base = (req: FastifyRequest): string => `${gatewayOriginOf(req, publicOrigin)}${SCIM_BASE_PATH}`;
  const userJson = async (req: FastifyRequest, user: UserRecord) => scimUser(user, await scimGroupRefs(deps), base(req));
  const groupJson = async (req: FastifyRequest, group: GroupRecord, withMembers = true) =>
    scimGroup(
      group,
      withMembers ? (await scimGroupMembers(deps, group)).map((u) => ({ subject: u.subject, name: u.name })) : null,
      base(req),
    );

  app.get('/ServiceProviderConfig', async (req, reply) => send(reply, 200, scimServiceProviderConfig(base(req))));
  app.get('/ResourceTypes', async (req, reply) => {
    const types = scimResourceTypes(base(req));
    return send(reply, 200, scimListResponse(types, types.length, 1));
  });
  app.get<{ Params: IdParams }>('/ResourceTypes/:id', async (req, reply) => {
    const type = scimResourceTypes(base(req)).find((t) => t.id === req.params.id);
    if (type === undefined) throw new ScimError('not_found', null, 'no such resource type');
    return send(reply, 200, type);
  });
  app.get('/Schemas', async (req, reply) => {
    const schemas = scimSchemas(base(req));
    return send(reply, 200, scimListResponse(schemas, schemas.length, 1));
  });
  app.get<{ Params: IdParams }>('/Schemas/:id', async (req, reply) => {
    const schema = scimSchemas(base(req)).find((s) => s.id === req.params.id);
    if (schema === undefined) throw new ScimError('not_found', null, 'no such schema');
    return send(reply, 200, schema);
  });

  app.get<{ Querystring: ListQuery }>('/Users', async (req, reply) => {
    const page = scimPage(req.query);
    const { total, users } = await scimListUsers(deps, { filter: scimListFilter('User', req.query.filter), ...page });
    const refs = await scimGroupRefs(deps);
    return send(
      reply,
      200,
      scimListResponse(
        users.map((u) => scimUser(u, refs, base(req))),
        total,
        page.startIndex,
      ),
    );
  });
  app.post('/Users', async (req, reply) => {
    const user = await scimCreateUser(deps, { body: req.body, token: tokenOf(req) });
    const json = await userJson(req, user);
    reply.header('location', (json.meta as { location: string }).location);
    return send(reply, 201, json);
  });
  app.get<{ Params: IdParams }>('/Users/:id', async (req, reply) =>
    send(reply, 200, await userJson(req, await scimGetUser(deps, req.params.id))),
  );
  app.put<{ Params: IdParams }>('/Users/:id', async (req, reply) => {
    const user = await scimReplaceUser(deps, { id: req.params.id, body: req.body, token: tokenOf(req) });
    return send(reply, 200, await userJson(req, user));
  });
  app.patch<{ Params: IdParams }>('/Users/:id', async (req, reply) => {
    const user = await scimPatchUser(deps, { id: req.params.id, body: req.body, token: tokenOf(req) });
    return send(reply, 200, await userJson(req, user));
  });
  app.delete<{ Params: IdParams }>('/Users/:id', async (req, reply) => {
    await scimDeleteUser(deps, { id: req.params.id, token: tokenOf(req) });
    return reply.code(204).send();
  });

  app.get<{ Querystring: ListQuery }>('/Groups', async (req, reply) => {
    const page = scimPage(req.query);
    const { total, groups } = await scimListGroups(deps, { filter: scimListFilter('Group', req.query.filter), ...page });
    const withMembers = !excluded(req.query).has('members');
    const resources = [];
    for (const g of groups) resources.push(await groupJson(req, g, withMembers));
    return send(reply, 200, scimListResponse(resources, total, page.startIndex));
  });
  app.post('/Groups', async (req, reply) => {
    const group = await scimCreateGroup(deps, { body: req.body, token: tokenOf(req) });
    const json = await groupJson(req, group);
    reply.header('location', (json.meta as { location: string }).location);
    return send(reply, 201, json);
  });
  app.get<{ Params: IdParams; Querystring: ListQuery }>('/Groups/:id', async (req, reply) => {
    const group = await scimGetGroup(deps, req.params.id);
    return send(reply, 200, await groupJson(req, group, !excluded(req.query).has('members')));
  });
  app.put<{ Params: IdParams }>('/Groups/:id', async (req, reply) => {
    const group = await scimReplaceGroup(deps, { id: req.params.id, body: req.body, token: tokenOf(req) });
    return send(reply, 200, await groupJson(req, group));
  });
  app.patch<{ Params: IdParams }>('/Groups/:id', async (req, reply) => {
    const group = await scimPatchGroup(deps, { id: req.params.id, body: req.body, token: tokenOf(req) });
    return send(reply, 200, await groupJson(req, group));
  });
  app.delete<{ Params: IdParams }>('/Groups/:id', async (req, reply) => {
    await scimDeleteGroup(deps, { id: req.params.id, token: tokenOf(req) });
    return reply.code(204).send();
  });

  // Every other path of the service is a SCIM 404, after the token check (nothing is told to a caller without one).
  const unknown = async (): Promise<never> => {
    throw new ScimError('not_found', null, 'no such SCIM endpoint (or not with this method)');
  };
  app.all('/', unknown);
  app.all('/*', unknown);
};
