import {
  addUser,
  type GroupListQuery,
  getUser,
  groupListQuery,
  groupListResponse,
  listGroups,
  listUsers,
  type Principal,
  removeUser,
  type UserActor,
  type UserChangeBody,
  type UserCreateBody,
  type UserListQuery,
  type UserParams,
  updateUserCounting,
  userChangeBody,
  userCreateBody,
  userListQuery,
  userPageSchema,
  userParams,
  userRemovedSchema,
  userResponse,
  userStatusResponse,
} from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { principalOf, requireManagementPrincipal } from '../http/principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from '../http/problem-schema.js';
import type { ManagementRouteOptions } from './route-options.js';
import { emptyBody, LOOPBACK_GUARD, MANAGEMENT_BEARER } from './schemas.js';

/** Who changes a user over this API, as every user event records it. */
function actorOf(principal: Principal): UserActor {
  return { via: 'management_api', subject: principal.subject, session: principal.session };
}

/**
 * The users and groups of both realms, behind a management bearer token: list, read, add,
 * change, disable, enable and remove users (core's user use cases, the operator owning the
 * attributes it sets), and list the groups with their member counts. Disabling revokes the
 * user's sessions at once; the last active management user can be neither disabled nor removed
 * (`409 last_management_user`).
 *
 * @example
 * await app.register(userRoutes, { deps });
 */
export const userRoutes: FastifyPluginAsync<ManagementRouteOptions> = async (app, { deps }) => {
  app.addHook('onRequest', requireManagementPrincipal(deps));

  app.get<{ Querystring: UserListQuery }>(
    '/v1/auth/users',
    {
      schema: documented({
        summary: 'List the users, one page after a subject, filtered by realm, status, group, email or text',
        security: MANAGEMENT_BEARER,
        querystring: userListQuery,
        response: { 200: { description: 'A page of users', ...userPageSchema }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    async (req) => {
      const q = req.query;
      return listUsers(deps, {
        realm: q.realm,
        status: q.status,
        group: q.group,
        email: q.email,
        text: q.filter,
        after: q.after,
        limit: q.limit === undefined ? undefined : Number(q.limit),
      });
    },
  );

  app.post<{ Body: UserCreateBody }>(
    '/v1/auth/users',
    {
      schema: documented({
        summary: 'Add a user without a credential yet (to pair or link later)',
        security: MANAGEMENT_BEARER,
        body: userCreateBody,
        response: {
          201: { description: 'The new user', ...userResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 409, 503),
        },
      }),
    },
    async (req, reply) => {
      const { realm, ...attributes } = req.body;
      const user = await addUser(deps, { realm, attributes, actor: actorOf(principalOf(req)), source: 'operator' });
      return reply.code(201).send({ user });
    },
  );

  app.get<{ Params: UserParams }>(
    '/v1/auth/users/:subject',
    {
      schema: documented({
        summary: 'Read a user',
        security: MANAGEMENT_BEARER,
        params: userParams,
        response: { 200: { description: 'The user', ...userResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 404, 503) },
      }),
    },
    async (req) => ({ user: await getUser(deps, { subject: req.params.subject }) }),
  );

  app.patch<{ Params: UserParams; Body: UserChangeBody }>(
    '/v1/auth/users/:subject',
    {
      schema: documented({
        summary: "Change a user's name, email or groups (null clears one)",
        security: MANAGEMENT_BEARER,
        params: userParams,
        body: userChangeBody,
        response: {
          200: { description: 'The user as changed', ...userResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 404, 409, 503),
        },
      }),
    },
    async (req) => {
      const { user } = await updateUserCounting(deps, {
        subject: req.params.subject,
        attributes: req.body,
        actor: actorOf(principalOf(req)),
        source: 'operator',
      });
      return { user };
    },
  );

  for (const [action, status] of [
    ['disable', 'disabled'],
    ['enable', 'active'],
  ] as const) {
    app.post<{ Params: UserParams }>(
      `/v1/auth/users/:subject/${action}`,
      {
        // Nothing to say but the subject: a POST without a body means `{}`.
        preValidation: (req, _reply, done) => {
          if (req.body === undefined) req.body = {};
          done();
        },
        schema: documented({
          summary:
            action === 'disable'
              ? 'Disable a user: refuse its sign-ins and revoke all its sessions at once'
              : 'Enable a disabled user: sign-in works again (its revoked sessions stay revoked)',
          security: MANAGEMENT_BEARER,
          params: userParams,
          body: emptyBody,
          response: {
            200: { description: `The user, ${status}, and how many sessions were revoked`, ...userStatusResponse },
            ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 404, ...(action === 'disable' ? [409] : []), 503),
          },
        }),
      },
      async (req) => {
        const { user, revokedSessions } = await updateUserCounting(deps, {
          subject: req.params.subject,
          attributes: { status },
          actor: actorOf(principalOf(req)),
          source: 'operator',
        });
        return { user, revoked_sessions: revokedSessions };
      },
    );
  }

  app.delete<{ Params: UserParams }>(
    '/v1/auth/users/:subject',
    {
      schema: documented({
        summary: 'Remove a user with its devices and links, revoking its sessions',
        security: MANAGEMENT_BEARER,
        params: userParams,
        response: {
          200: { description: 'What was removed', ...userRemovedSchema },
          ...problemResponses(LOOPBACK_GUARD, 401, 404, 409, 503),
        },
      }),
    },
    async (req) => removeUser(deps, { subject: req.params.subject, actor: actorOf(principalOf(req)) }),
  );

  app.get<{ Querystring: GroupListQuery }>(
    '/v1/auth/groups',
    {
      schema: documented({
        summary: 'List the groups with their member counts',
        security: MANAGEMENT_BEARER,
        querystring: groupListQuery,
        response: { 200: { description: 'The groups', ...groupListResponse }, ...problemResponses(LOOPBACK_GUARD, 401, 503) },
      }),
    },
    async (req) => ({ groups: await listGroups(deps, req.query.realm === undefined ? {} : { realm: req.query.realm }) }),
  );
};
