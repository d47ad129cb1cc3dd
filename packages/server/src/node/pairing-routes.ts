import { AuthError, clusterIdOf, completePairing, deviceToJson, isIdOfKind, prepareLinkPairing, preparePairing } from '@svc/core';
import type { FastifyPluginAsync } from 'fastify';
import { failureCounting } from '../http/failure-counting.js';
import { clientAddressKey } from '../http/failure-limiter.js';
import { principalOf, requireManagementPrincipal } from '../http/principal.js';
import { BODY_PROBLEMS, documented, problemResponses } from '../http/problem-schema.js';
import type { PairingRouteOptions } from './route-options.js';
import { NODE_PATHS } from './routes.js';
import {
  type CompleteBody,
  completeBody,
  MANAGEMENT_BEARER,
  type PrepareBody,
  pairedDeviceResponse,
  prepareBody,
  preparedPairingResponse,
} from './schemas.js';

/**
 * Device pairing, the two halves of an enrolment intent:
 *
 * - `POST /edge/0-alpha/pairing/prepare` (management-realm bearer token),
 *   `{"realm", "public_key", "name"?, "subject"?, "ttl_seconds"?}` → `201` with the intent id, the
 *   one-time code, the realm, subject, name, expiry, this node's id (for the admin to read
 *   out) and the cluster id; with `"provider"` instead of `"public_key"`, a link intent: its code lets the holder
 *   link a credential of that provider (a passkey, a company login) to the subject at the
 *   gateway's sign-in page, and be signed in with it;
 * - `POST /edge/0-alpha/pairing/complete` (no bearer: the code plus a signature by the new key
 *   over `pairingProofString({nodeId, intentId, publicKey})`),
 *   `{"intent_id", "code", "public_key", "signature", "name"?}` → `201 {"device": Device,
 *   "prepared_by_node", "completed_by_node", "cluster_id"}`: the node that prepared the intent,
 *   the node that answered, and their cluster (an intent prepared on one node of the cluster may
 *   be completed on another; the audit events name them too).
 *
 * The core checks the code in constant time, burns the intent after 5 wrong codes, lets one
 * of N concurrent completions win, and audits every step. Here, completions are counted by
 * {@link failureCounting}: reserved before they run, per client address unit and per intent,
 * and kept when they fail (401s); beyond the limit an attempt still runs (the right code and
 * proof complete), and its failure is answered `429 rate_limited`, uncounted and unaudited.
 *
 * @example
 * await app.register(pairingRoutes, { deps, identity, providers, limiter: createFailureLimiter({ clock: deps.clock, scope: 'pairing' }) });
 */
export const pairingRoutes: FastifyPluginAsync<PairingRouteOptions> = async (app, { deps, identity, limiter, providers }) => {
  await app.register(failureCounting, { limiter });

  app.post<{ Body: PrepareBody }>(
    NODE_PATHS.pairingPrepare,
    {
      onRequest: requireManagementPrincipal(deps),
      schema: documented({
        summary: 'Prepare a pairing intent for one device key, or a link intent for one provider',
        security: MANAGEMENT_BEARER,
        body: prepareBody,
        response: {
          201: { description: 'The intent and its one-time code', ...preparedPairingResponse },
          ...problemResponses(...BODY_PROBLEMS, 401, 404, 503),
        },
      }),
    },
    async (req, reply) => {
      if (req.body.provider !== undefined) {
        if (req.body.public_key !== undefined) {
          throw new AuthError('invalid_request', 'give public_key (a device pairing) or provider (a link intent), not both');
        }
        const prepared = await prepareLinkPairing(deps, {
          principal: principalOf(req),
          realm: req.body.realm,
          provider: req.body.provider,
          providers: providers.flatMap((p) => (p.package === undefined ? [] : [{ name: p.name, realms: p.package.realms }])),
          subject: req.body.subject,
          name: req.body.name,
          ttlSeconds: req.body.ttl_seconds,
          nodeId: identity().nodeId,
        });
        return reply.code(201).send({ ...prepared, node_id: identity().nodeId, cluster_id: clusterIdOf(deps.projectId) });
      }
      const prepared = await preparePairing(deps, {
        principal: principalOf(req),
        realm: req.body.realm,
        publicKey: req.body.public_key,
        subject: req.body.subject,
        name: req.body.name,
        ttlSeconds: req.body.ttl_seconds,
        nodeId: identity().nodeId,
      });
      return reply.code(201).send({ ...prepared, node_id: identity().nodeId, cluster_id: clusterIdOf(deps.projectId) });
    },
  );

  app.post<{ Body: CompleteBody }>(
    NODE_PATHS.pairingComplete,
    {
      config: {
        // Per address unit and per intent (the intent also burns after 5 wrong codes).
        attemptKeys: (req) => {
          const intentId = (req.body as CompleteBody).intent_id;
          return [clientAddressKey(req.ip), ...(isIdOfKind(intentId, 'intent') ? [`pairing:${intentId}`] : [])];
        },
        // The right code and proof complete whoever spent the budget; a failure beyond it is
        // neither counted against the intent nor audited (see completePairing's countFailure).
        beyondBudget: 'evaluate',
      },
      schema: documented({
        summary: 'Complete a pairing with the code and a signature by the new key',
        body: completeBody,
        response: {
          201: { description: 'The enrolled device', ...pairedDeviceResponse },
          ...problemResponses(...BODY_PROBLEMS, 401, 409, 429, 503),
        },
      }),
    },
    async (req, reply) => {
      const { intent_id, code, public_key, signature, name } = req.body;
      const nodeId = identity().nodeId;
      const { device, preparedByNode } = await completePairing(deps, {
        nodeId,
        intentId: intent_id,
        code,
        publicKey: public_key,
        signature,
        name,
        // Beyond the budget a failure is answered 429 and writes nothing: no count, no audit event.
        countFailure: req.attempt?.counted !== false,
      });
      // Which node and which cluster answered: an intent prepared on one node of the cluster may
      // be completed on another (the new device signs over the id of the node it completes on).
      return reply.code(201).send({
        device: deviceToJson(device),
        prepared_by_node: preparedByNode,
        completed_by_node: nodeId,
        cluster_id: clusterIdOf(deps.projectId),
      });
    },
  );
};
