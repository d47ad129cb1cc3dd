import { type AuthDeps, RESERVED_PREFIX, revokeResponse } from '@svc/core';
import type { FastifySchema } from 'fastify';
import { APPLICATION_AUTH_PREFIX, buildGatewayApp, JWKS_PATH } from '../gateway/app.js';
import { LOGIN_PATH } from '../gateway/browser-session.js';
import { BODY_PROBLEMS, type DocumentedSchema, documented, problemResponses } from '../http/problem-schema.js';
import { type RegisteredRoute, registeredRoutes } from '../http/route-registry.js';
import { ACCOUNT_ROUTE_DOCS } from './account.js';
import { SCIM_CATCH_ALLS, SCIM_ROUTE_DOCS } from './scim.js';

/**
 * The gateway's catch-alls under `/.svc/`: they answer `404 not_found` to every path of the
 * prefix no other route claims. Not operations of the API, so not in the document.
 */
const RESERVED_CATCH_ALLS: ReadonlySet<string> = new Set([RESERVED_PREFIX.replace(/\/$/, ''), `${RESERVED_PREFIX}*`, ...SCIM_CATCH_ALLS]);

const providerParams = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { name: { type: 'string', description: 'the alias of the provider module in `project.edn` (`:svc/modules`)' } },
} as const;

const returnPath = {
  type: 'string',
  maxLength: 2048,
  description: 'where the browser goes once signed in: a path of this origin',
} as const;

const redirect = (description: string) => ({
  type: 'null',
  description,
  headers: { location: { type: 'string', description: 'the target' } },
});

/** The statuses of a provider's ceremony: the caller's token, the unknown provider, the budgets, the provider's outages. */
const CEREMONY_PROBLEMS = [401, 404, 429, 502, 503] as const;

/**
 * How the gateway's routes that the gateway registers without a full schema (they answer HTML,
 * redirects, or whatever JSON the provider's ceremony needs) are described in the document,
 * by `METHOD url`. What the route registers itself (a body schema) wins over this. A reserved
 * route with neither is refused by {@link gatewayDocumentedRoutes}, so a new one cannot be
 * left out of the document, and an entry here that matches no served route is refused too.
 */
export const GATEWAY_ROUTE_DOCS: Readonly<Record<string, DocumentedSchema>> = {
  ...SCIM_ROUTE_DOCS,
  ...ACCOUNT_ROUTE_DOCS,
  [`GET ${JWKS_PATH}`]: documented({
    summary: 'The public keys that sign Svc-Assertion (JWK Set, OKP/Ed25519; docs/assertion.md)',
    response: {
      200: {
        description: 'The JWK Set (`application/jwk-set+json`)',
        content: {
          'application/jwk-set+json': {
            schema: {
              type: 'object',
              required: ['keys'],
              properties: {
                keys: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['kty', 'crv', 'x', 'kid'],
                    properties: {
                      kty: { const: 'OKP' },
                      crv: { const: 'Ed25519' },
                      x: { type: 'string' },
                      kid: { type: 'string' },
                      use: { const: 'sig' },
                      alg: { const: 'EdDSA' },
                    },
                  },
                },
              },
            },
          },
        },
      },
      ...problemResponses(),
    },
  }),
  [`GET ${LOGIN_PATH}`]: documented({
    summary: 'The sign-in page: one button per provider of the application realm (HTML)',
    querystring: {
      type: 'object',
      properties: {
        return: returnPath,
        pairing: {
          type: 'string',
          maxLength: 64,
          description: 'a link intent id (`int_...`) an admin created with `svc auth pair --provider`',
        },
      },
    },
    response: {
      200: { description: 'The sign-in page (`text/html`)', content: { 'text/html': { schema: { type: 'string' } } } },
      ...problemResponses(),
    },
  }),
  [`POST ${APPLICATION_AUTH_PREFIX}/providers/:name/begin`]: documented({
    summary: "Begin a provider's ceremony in the sign-in page's script (sets the flow cookie)",
    params: providerParams,
    response: {
      200: {
        description: 'What the provider asks of the browser: `{"redirect"}`, or the provider\'s own JSON (a passkey\'s options)',
        type: 'object',
        additionalProperties: true,
      },
      ...problemResponses(...BODY_PROBLEMS, ...CEREMONY_PROBLEMS, 403),
    },
  }),
  [`GET ${APPLICATION_AUTH_PREFIX}/providers/:name/begin`]: documented({
    summary: 'Begin a redirecting provider (an OpenID Provider) from a plain link (sets the flow cookie)',
    params: providerParams,
    querystring: {
      type: 'object',
      properties: { intent: { type: 'string', enum: ['signin', 'signup'], default: 'signin' }, return: returnPath },
    },
    response: { 302: redirect("To the provider's sign-in"), ...problemResponses(...CEREMONY_PROBLEMS) },
  }),
  [`POST ${APPLICATION_AUTH_PREFIX}/providers/:name/finish`]: documented({
    summary: "Finish a provider's ceremony begun in this browser (the flow cookie): the session goes into HttpOnly cookies",
    params: providerParams,
    body: {
      description:
        "The provider's answer from the browser (a passkey's assertion), and for a sign-up the service's own `display_name` (the new user's name, 1-128 characters; taken out before the provider sees the body)",
      type: 'object',
      additionalProperties: true,
      properties: { display_name: { type: 'string', maxLength: 512 } },
    },
    response: {
      200: {
        description: 'Signed in (`outcome: "session"`), or the identity linked to the signed-in user (`outcome: "linked"`)',
        type: 'object',
        required: ['outcome', 'redirect'],
        properties: {
          outcome: { type: 'string', enum: ['session', 'linked'] },
          session_id: { type: 'string' },
          link: { type: 'object', additionalProperties: true },
          redirect: { type: 'string' },
        },
      },
      ...problemResponses(...BODY_PROBLEMS, ...CEREMONY_PROBLEMS, 403, 409),
    },
  }),
  [`GET ${APPLICATION_AUTH_PREFIX}/providers/:name/callback`]: documented({
    summary: "The provider's redirect back (an OpenID Provider's `redirect_uri`): finishes the ceremony begun in this browser",
    params: providerParams,
    response: {
      303: redirect('Signed in: back to the return path'),
      ...problemResponses(...CEREMONY_PROBLEMS, 403, 409),
    },
  }),
  [`GET ${APPLICATION_AUTH_PREFIX}/sso/start`]: documented({
    summary:
      'With `:svc/app-auth-origin`, on a route host: set the handoff state cookie and send the browser to the auth origin to sign in (or be handed its sign-in)',
    querystring: { type: 'object', properties: { return: returnPath } },
    response: {
      302: redirect("To the auth origin's `sso/authorize` (or, on the auth origin itself, its sign-in page)"),
      ...problemResponses(400, 503),
    },
  }),
  [`GET ${APPLICATION_AUTH_PREFIX}/sso/authorize`]: documented({
    summary:
      'With `:svc/app-auth-origin`, on the auth origin only: hand the signed-in browser to a route host with a one-time code (30 s, single use, bound to that origin and to the state cookie there)',
    querystring: {
      type: 'object',
      properties: {
        return: { type: 'string', maxLength: 2048, description: 'the absolute URL to come back to: on a configured route origin' },
        binding: { type: 'string', description: "SHA-256 (hex) of the route host's state value" },
      },
    },
    response: {
      302: redirect("To the route host's `sso/callback` with the code, or to the sign-in page first when this browser has no session"),
      ...problemResponses(400, 404, 503),
    },
  }),
  [`GET ${APPLICATION_AUTH_PREFIX}/sso/callback`]: documented({
    summary:
      "With `:svc/app-auth-origin`, on a route host: redeem the code with this browser's state cookie; this host's own session goes into HttpOnly cookies",
    querystring: { type: 'object', properties: { code: { type: 'string', description: 'the one-time handoff code (`svch_...`)' } } },
    response: {
      303: redirect('Signed in on this host: back to the return path, without the code'),
      ...problemResponses(400, 403, 503),
    },
  }),
  [`POST ${APPLICATION_AUTH_PREFIX}/logout`]: documented({
    summary:
      "Log the browser out: revokes the cookies' session and clears them (a plain form button works); with `:svc/app-auth-origin`, the sign-in ends on every route host",
    response: {
      200: {
        description: 'The revoked session, or `{"revoked": false}` when the browser had none',
        type: 'object',
        required: ['revoked'],
        properties: revokeResponse.properties,
      },
      303: redirect('To the sign-in page, for a browser that accepts `text/html`'),
      ...problemResponses(403, 503),
    },
  }),
};

/**
 * The gateway's own routes under `/.svc/` as the document describes them: the routes a gateway
 * built by `buildGatewayApp` registers (the application-realm sign-in, the browser routes, the
 * JWK Set; not the 404 catch-alls), each with its registered schema completed by
 * {@link GATEWAY_ROUTE_DOCS}. The gateway is built, never listens, and is closed again; `deps`
 * are only handed over (building runs none of them).
 *
 * @throws {TypeError} when a reserved route has no response schema and no entry in
 *   {@link GATEWAY_ROUTE_DOCS}, or an entry names no served route.
 * @example
 * for (const route of await gatewayDocumentedRoutes(deps)) app.route({ ...route, handler });
 */
export async function gatewayDocumentedRoutes(deps: AuthDeps): Promise<readonly RegisteredRoute[]> {
  const gateway = await buildGatewayApp({
    deps,
    logger: false,
    policy: { publicPaths: [], identityHeaders: [], requirements: [] },
    trustedProxies: [],
    // With the sign-in handoff (`:svc/app-auth-origin`), so its routes are documented too.
    sso: { authOrigin: 'https://auth.example.com', origins: [] },
  });
  let served: readonly RegisteredRoute[];
  try {
    // Nothing else is registered before an application is attached: every route is reserved.
    served = registeredRoutes(gateway).filter((r) => !RESERVED_CATCH_ALLS.has(r.url));
  } finally {
    await gateway.close();
  }
  const out: RegisteredRoute[] = [];
  const used = new Set<string>();
  for (const route of served) {
    if (!route.url.startsWith(RESERVED_PREFIX)) throw new TypeError(`the gateway registered ${route.url} outside ${RESERVED_PREFIX}`);
    const key = `${route.method} ${route.url}`;
    const doc = GATEWAY_ROUTE_DOCS[key];
    if (doc !== undefined) used.add(key);
    const schema: FastifySchema = { ...doc, ...route.schema };
    if (schema.response === undefined) {
      throw new TypeError(
        `the gateway route ${key} has no response schema: describe it in GATEWAY_ROUTE_DOCS (packages/server/src/openapi/gateway.ts)`,
      );
    }
    out.push({ method: route.method, url: route.url, schema });
  }
  const stale = Object.keys(GATEWAY_ROUTE_DOCS).filter((k) => !used.has(k));
  if (stale.length > 0) throw new TypeError(`GATEWAY_ROUTE_DOCS describes routes the gateway does not serve: ${stale.join(', ')}`);
  return out;
}
