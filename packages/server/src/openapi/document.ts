import { generateKeyPairSync } from 'node:crypto';
import { createRequire } from 'node:module';
import fastifySwagger from '@fastify/swagger';
import { type AuthDeps, isReservedPath } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import Fastify, { type HTTPMethods } from 'fastify';
import { createChallengeBudget } from '../http/challenge-budget.js';
import { createFailureLimiter } from '../http/failure-limiter.js';
import { hardenSurface } from '../http/harden.js';
import { registerManagementRoutes } from '../management/route-plugins.js';
import { ed25519KeyProvider } from '../node/components.js';
import { createNodeIdentity } from '../node/identity.js';
import { registerNodeRoutes } from '../node/route-plugins.js';
import { gatewayDocumentedRoutes } from './gateway.js';

/** An OpenAPI 3.1 document as JSON. */
export type OpenApiDocument = Record<string, unknown>;

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** A part of the deps that generating the document must never use: any use is a bug, and says so. */
function unusable(what: string): never {
  return new Proxy(
    {},
    {
      get(_target, prop) {
        throw new TypeError(`the OpenAPI document is generated without running a route: the ${what} was used (${String(prop)})`);
      },
    },
  ) as never;
}

/** Which surface a path belongs to: the node surface's paths are `/.well-known/edge` and `/edge/...`, the gateway's `/.svc/...`. */
function surfaceOf(url: string): 'node' | 'management' | 'gateway' {
  if (isReservedPath(url)) return 'gateway';
  return url === '/.well-known/edge' || url.startsWith('/edge/') ? 'node' : 'management';
}

const DESCRIPTION = [
  'The HTTP surfaces of svc auth, generated from the route schemas (`npm run docs` writes docs/openapi.json).',
  'Each surface listens on its own address: operations tagged `management` are the loopback management API',
  '(default 127.0.0.1:9090), operations tagged `node` the node surface (`SVC_NODE_LISTEN`), operations tagged',
  "`gateway` the application gateway's own routes under `/.svc/` (`:svc/app-listen`, default 127.0.0.1:8080):",
  'the application-realm sign-in, the browser sign-in through provider packages, and the keys that sign `Svc-Assertion`.',
  'Every error is application/problem+json with a stable `code` (docs/errors.md).',
].join(' ');

/**
 * Generates the OpenAPI 3.1 document of the management API, the node surface and the
 * application gateway's own routes from their route schemas: it registers the very route lists
 * the running surfaces register ({@link registerManagementRoutes}, {@link registerNodeRoutes},
 * and the routes a built gateway registered, see {@link gatewayDocumentedRoutes}) on an app that
 * never listens and never runs a handler, and lets @fastify/swagger describe them. The problem+json body is
 * the shared component `Problem`.
 *
 * @example
 * const document = await buildOpenApiDocument();
 * document.openapi; // '3.1.0'
 */
export async function buildOpenApiDocument(): Promise<OpenApiDocument> {
  const app = Fastify({ logger: false });
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'svc auth', version, description: DESCRIPTION },
      tags: [
        { name: 'management', description: 'The loopback management API' },
        { name: 'node', description: 'The node surface (may listen on a network address)' },
        { name: 'gateway', description: "The application gateway's reserved routes under /.svc/ (the application realm)" },
      ],
      components: {
        securitySchemes: {
          managementBearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'A management-realm access token (POST /v1/auth/sessions, POST /v1/auth/refresh)',
          },
          applicationBearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'An application-realm access token (POST /.svc/auth/v1/sessions, POST /.svc/auth/v1/refresh on the gateway)',
          },
          scimBearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'A SCIM token (svcs_..., `svc auth scim token create`): the only credential of /.svc/scim/v2 (docs/scim.md)',
          },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transform: ({ schema, url }) => ({ schema: { ...schema, tags: [surfaceOf(url)] }, url }),
  });
  hardenSurface(app, { loopbackOnly: false });

  const deps: AuthDeps = {
    store: unusable('store'),
    clock: unusable('clock'),
    random: unusable('randomness'),
    log: unusable('log'),
    projectId: 'prj_openapi',
    settings: DEFAULT_AUTH_SETTINGS,
  };
  const limiter = createFailureLimiter({ clock: deps.clock, store: deps.store });
  await registerManagementRoutes(app, {
    deps,
    limiter,
    challenges: createChallengeBudget({ clock: deps.clock }),
    openApiJson: () => Promise.reject(new TypeError('the OpenAPI generator serves no document')),
  });
  await registerNodeRoutes(app, {
    deps,
    identity: createNodeIdentity(generateKeyPairSync('ed25519').privateKey),
    providers: [ed25519KeyProvider],
    components: unusable('component status'),
    checkTimeoutMs: 2000,
    limiter,
  });
  // The gateway's routes come from a gateway the same code builds (see gatewayDocumentedRoutes):
  // registered here with their schemas and a handler the document never runs.
  for (const route of await gatewayDocumentedRoutes(deps)) {
    app.route({
      method: route.method as HTTPMethods,
      url: route.url,
      ...(route.schema === undefined ? {} : { schema: route.schema }),
      handler: () => {
        throw new TypeError('the OpenAPI generator runs no route');
      },
    });
  }
  await app.ready();
  const document = app.swagger() as OpenApiDocument;
  await app.close();
  return document;
}

/**
 * The text of docs/openapi.json: the generated document, two-space indented, with a final
 * newline. `npm run docs` writes it; a test regenerates it and fails on any difference.
 *
 * @example
 * writeFileSync('docs/openapi.json', await renderOpenApiDocument());
 */
export async function renderOpenApiDocument(): Promise<string> {
  return `${JSON.stringify(await buildOpenApiDocument(), null, 2)}\n`;
}

let cached: Promise<string> | undefined;

/**
 * The document of {@link buildOpenApiDocument} as JSON text, generated once per process on
 * first use (a failed generation is retried on the next call).
 *
 * @example
 * reply.type('application/json').send(await openApiJson());
 */
export function openApiJson(): Promise<string> {
  if (cached === undefined) {
    const pending = buildOpenApiDocument().then((d) => JSON.stringify(d));
    pending.catch(() => {
      if (cached === pending) cached = undefined;
    });
    cached = pending;
  }
  return cached;
}
