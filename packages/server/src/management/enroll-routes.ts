import { deviceToJson, enrollWithBootstrapToken } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { failureCounting } from '../http/failure-counting.js';
import { clientAddressKey } from '../http/failure-limiter.js';
import { BODY_PROBLEMS, documented, problemResponses } from '../http/problem-schema.js';
import type { EnrollRouteOptions } from './route-options.js';
import { deviceResponse, type EnrollBody, enrollBody, LOOPBACK_GUARD } from './schemas.js';

/**
 * `POST /v1/auth/enroll`: the first management device, enrolled with a bootstrap token (a
 * management-realm credential only, so this route is the management API's alone). Each attempt
 * is counted by {@link failureCounting} against the client's address unit, in the same budget
 * as the sign-in routes: a wrong bootstrap token (401) counts, anything else gives its slot back.
 *
 * @example
 * await app.register(enrollRoutes, { deps, limiter });
 */
export const enrollRoutes: FastifyPluginAsync<EnrollRouteOptions> = async (app, { deps, limiter }) => {
  await app.register(failureCounting, { limiter });

  app.post<{ Body: EnrollBody }>(
    '/v1/auth/enroll',
    {
      config: { attemptKeys: (req) => [clientAddressKey(req.ip)], beyondBudget: 'evaluate' },
      schema: documented({
        summary: 'Enroll a management device with a bootstrap token',
        body: enrollBody,
        response: {
          201: { description: 'The enrolled device', ...deviceResponse },
          ...problemResponses(LOOPBACK_GUARD, ...BODY_PROBLEMS, 401, 409, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const { bootstrap_token, public_key, name } = req.body;
      const device = await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap_token, publicKey: public_key, name });
      return reply.code(201).send({ device: deviceToJson(device) });
    },
  );
};
