import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { canonicalJson, ERROR_CODES, sha256Hex } from '@svc/core';
import { type RegisteredRoute, registeredRoutes } from '../src/http/route-registry.js';
import { buildGatewayApp, renderOpenApiDocument } from '../src/index.js';
import { buildOpenApiDocument } from '../src/openapi/document.js';
import { OPENAPI_PATH } from '../src/openapi/route.js';
import { admin, api } from './support/harness.js';
import { type NodeHarness, nodeApi, startNodeHarness } from './support/node-harness.js';

const committed = new URL('../../../docs/openapi.json', import.meta.url);

// biome-ignore lint/suspicious/noExplicitAny: the document is inspected field by field
type Doc = any;

/** The OpenAPI path of a Fastify URL pattern: `/v1/auth/devices/:id` → `/v1/auth/devices/{id}`. */
function openApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** Every operation of a document as `METHOD path`, sorted. */
function operationsOf(doc: Doc): string[] {
  const ops: string[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(item)) ops.push(`${method.toUpperCase()} ${path}`);
  }
  return ops.sort();
}

async function validate(doc: Doc): Promise<{ valid: boolean; errors: unknown; version: string }> {
  const validator = new Validator();
  // The validator may annotate what it is given: hand it a copy.
  const result = await validator.validate(structuredClone(doc));
  return { valid: result.valid, errors: result.errors, version: validator.version };
}

describe('OpenAPI document', () => {
  let generated: Doc;
  before(async () => {
    generated = await buildOpenApiDocument();
  });

  test('docs/openapi.json drifts from the route schemas: regenerated in memory it is byte for byte the same (run `npm run docs`)', async () => {
    assert.equal(readFileSync(committed, 'utf8'), await renderOpenApiDocument(), 'docs/openapi.json is out of date: run npm run docs');
  });

  test('the document is valid OpenAPI 3.1 for a standard validator (@seriousme/openapi-schema-validator)', async () => {
    assert.equal(generated.openapi, '3.1.0');
    const result = await validate(JSON.parse(readFileSync(committed, 'utf8')));
    assert.equal(result.version, '3.1');
    assert.deepEqual(result.errors, undefined);
    assert.equal(result.valid, true);
    // The validator does refuse a broken document: a response without its required description.
    const broken = structuredClone(generated);
    delete broken.paths['/health'].get.responses['200'].description;
    assert.equal((await validate(broken)).valid, false);
  });

  test('the problem+json body is one shared component whose codes are exactly the error table', () => {
    const problem = generated.components.schemas.Problem;
    assert.deepEqual(problem.properties.code.enum, Object.keys(ERROR_CODES));
    const refs = JSON.stringify(generated.paths).match(/"#\/components\/schemas\/Problem"/g) ?? [];
    assert.ok(refs.length > 0);
    for (const item of Object.values(generated.paths as Record<string, Record<string, Doc>>)) {
      for (const op of Object.values(item)) {
        for (const status of ['400', '500']) {
          assert.deepEqual(op.responses[status]?.content?.['application/problem+json']?.schema, { $ref: '#/components/schemas/Problem' });
        }
      }
    }
  });
});

/** The gateway's 404 catch-alls of the reserved prefix (and of its SCIM service): they answer every other path, and are no operation of the API. */
const GATEWAY_CATCH_ALLS = ['/.svc', '/.svc/*', '/.svc/scim/v2', '/.svc/scim/v2/', '/.svc/scim/v2/*'];

describe('routes served against the document', () => {
  let h: NodeHarness;
  let doc: Doc;
  let gateway: readonly RegisteredRoute[];
  before(async () => {
    h = await startNodeHarness({ socket: false, store: 'memory' });
    doc = JSON.parse(readFileSync(committed, 'utf8'));
    // The routes a gateway registers before any application is attached: its reserved /.svc/ routes.
    const app = await buildGatewayApp({
      deps: h.deps,
      logger: false,
      policy: { publicPaths: [], identityHeaders: [], requirements: [] },
      trustedProxies: [],
      // With the sign-in handoff (`:svc/app-auth-origin`), whose routes exist only then.
      sso: { authOrigin: 'https://auth.example.com', origins: [] },
    });
    gateway = registeredRoutes(app).filter((r) => !GATEWAY_CATCH_ALLS.includes(r.url));
    await app.close();
  });
  after(() => h.close());

  /**
   * What is wrong with how a gateway route is described, or nothing. Its browser routes answer
   * HTML, redirects or the provider's JSON, so they register no response schema: the document
   * must still give each a success answer and the problem+json refusals.
   */
  function gatewayProblemsOf(route: RegisteredRoute): string[] {
    const where = `${route.method} ${route.url}`;
    const op = doc.paths[openApiPath(route.url)]?.[route.method.toLowerCase()];
    if (op === undefined) return [`${where} is served by the gateway but not in docs/openapi.json`];
    const out: string[] = [];
    if (JSON.stringify(op.tags) !== JSON.stringify(['gateway'])) out.push(`${where} is tagged ${JSON.stringify(op.tags)}, not gateway`);
    if (typeof op.summary !== 'string' || op.summary === '') out.push(`${where} has no summary`);
    if (!Object.keys(op.responses).some((s) => /^[23]\d\d$/.test(s))) out.push(`${where} documents no success answer`);
    if (op.responses['400'] === undefined || op.responses['500'] === undefined) out.push(`${where} documents no problem+json refusals`);
    const pathParams = (op.parameters ?? []).filter((p: Doc) => p.in === 'path').map((p: Doc) => p.name);
    for (const name of [...route.url.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1])) {
      if (!pathParams.includes(name)) out.push(`${where} does not document its path parameter ${name}`);
    }
    return out;
  }

  test("every route of the gateway's reserved prefix is in the document, tagged gateway, with its answers (and nothing else is)", () => {
    assert.ok(gateway.length >= 12, `the gateway registered only ${gateway.length} reserved routes`);
    assert.ok(gateway.every((r) => r.url.startsWith('/.svc/')));
    assert.deepEqual(gateway.flatMap(gatewayProblemsOf), []);
    const inDocument = operationsOf(doc).filter((op) => op.split(' ')[1]?.startsWith('/.svc/'));
    assert.deepEqual(inDocument, gateway.map((r) => `${r.method} ${openApiPath(r.url)}`).sort());
  });

  test('the application-realm bearer routes name the applicationBearer scheme, the management ones managementBearer', () => {
    assert.deepEqual(doc.paths['/.svc/auth/v1/me'].get.security, [{ applicationBearer: [] }]);
    assert.deepEqual(doc.paths['/v1/auth/me'].get.security, [{ managementBearer: [] }]);
    assert.equal(doc.components.securitySchemes.applicationBearer.scheme, 'bearer');
  });

  /** What is wrong with how `route` is described, or nothing. */
  function problemsOf(route: RegisteredRoute, surface: 'management' | 'node'): string[] {
    const where = `${route.method} ${route.url}`;
    const op = doc.paths[openApiPath(route.url)]?.[route.method.toLowerCase()];
    if (op === undefined) return [`${where} is served but not in docs/openapi.json`];
    const out: string[] = [];
    if (JSON.stringify(op.tags) !== JSON.stringify([surface])) out.push(`${where} is tagged ${JSON.stringify(op.tags)}, not ${surface}`);
    const response = (route.schema?.response ?? {}) as Record<string, unknown>;
    if (!Object.keys(response).some((s) => /^2\d\d$/.test(s))) out.push(`${where} has no success response schema`);
    if (response['400'] === undefined || response['500'] === undefined) out.push(`${where} has no problem+json response schemas`);
    if (['POST', 'PUT', 'PATCH'].includes(route.method) && route.schema?.body === undefined) out.push(`${where} has no body schema`);
    if (route.url.includes(':') && route.schema?.params === undefined) out.push(`${where} has no params schema`);
    return out;
  }

  test('a route registered without request and response schemas, or missing from the document, fails the build', () => {
    // The console's HTML pages (docs/console.md) are not API routes: the document leaves them out.
    const management = registeredRoutes(h.app).filter((r) => r.url !== '/console' && !r.url.startsWith('/console/'));
    const node = registeredRoutes(h.node);
    assert.ok(management.length > 0 && node.length > 0);
    const problems = [...management.map((r) => problemsOf(r, 'management')), ...node.map((r) => problemsOf(r, 'node'))].flat();
    assert.deepEqual(problems, []);
    // And the document lists nothing that is not served.
    const served = [...management, ...node, ...gateway].map((r) => `${r.method} ${openApiPath(r.url)}`).sort();
    assert.deepEqual(operationsOf(doc), served);
  });

  test(`GET ${OPENAPI_PATH} on the management API serves the committed document`, async () => {
    const r = await api(h, 'GET', OPENAPI_PATH);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.deepEqual(r.body, doc);
  });

  test('the node surface does not serve the document', async () => {
    const r = await nodeApi(h, 'GET', OPENAPI_PATH);
    assert.equal(r.status, 404);
    assert.equal((r.body as { code: string }).code, 'not_found');
  });

  test('a response schema drops no field: served audit events still re-hash to their chain', async () => {
    const { pair } = await admin(h);
    const r = await api(h, 'GET', '/v1/auth/audit', { token: pair.access_token });
    assert.equal(r.status, 200);
    assert.ok(r.body.events.length > 0);
    let prev = '0'.repeat(64);
    for (const event of r.body.events) {
      const { hash, ...rest } = event;
      assert.equal(event.prev_hash, prev);
      assert.equal(sha256Hex(canonicalJson(rest)), hash, `event ${event.seq} does not re-hash`);
      prev = hash;
    }
  });
});
