import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { after, before, describe } from 'node:test';
import { buildMetricsApp, createServiceMetrics } from '../../../src/index.js';
import { startGatewayHarness } from '../../support/gateway-harness.js';
import { type Harness, newDeviceKey, type RawReply, raw, startHarness } from '../../support/harness.js';
import { startNodeHarness } from '../../support/node-harness.js';

/** A running listener of a surface: its port, and how to stop it (and what it needed). */
export interface Listener {
  readonly port: number;
  close(): Promise<void>;
}

/** What a request gets: a status and an error `code` (problem+json), or null for a success. */
export interface Outcome {
  readonly status: number;
  readonly code: string | null;
}

/**
 * One HTTP listener of the project, as every attack file sees it. A new surface gets every
 * attack by being added to {@link SURFACES}; where a surface legitimately differs, this record
 * says how, as data.
 */
export interface SurfaceUnderAttack {
  readonly name: string;
  /** Starts the listener on `host` (127.0.0.1 unless said otherwise), port 0. */
  start(host?: string): Promise<Listener>;
  /** Paths anyone may GET (200): the attacks on Host and Origin aim at these; the first answers the same JSON every time. */
  readonly publicPaths: readonly string[];
  /** The `Allow` header of `publicPaths[0]` (a CONNECT to it is refused like any other method it lacks). */
  readonly publicAllow: string;
  /**
   * Where bodies are sent: a POST route that takes JSON without credentials or, on a surface
   * that takes no bodies, a path whose POST is refused once the body is read.
   */
  readonly bodyPath: string;
  /** A body `bodyPath` accepts as JSON, and what it gets then (the media type is not what refuses it). */
  readonly jsonBody: () => { readonly body: string; readonly outcome: Outcome };
  /**
   * What a body in another media type may get: `415` where a route takes JSON; where none
   * does, the method is refused (`405`), or `415` for a type the JSON parser claims and refuses.
   */
  readonly otherMediaType: readonly Outcome[];
  /** What a 65,536-byte JSON body (exactly the limit) `{"public_key":"aaa…"}` gets: parsed, refused only for its content. */
  readonly bodyAtLimit: Outcome;
  /**
   * True when every request must name a loopback Host and Origin (the surface binds loopback
   * only); false when the surface may bind a network address, where the DNS-rebinding guard
   * covers only the requests that arrive on a loopback address.
   */
  readonly loopbackOnly: boolean;
}

const UNSUPPORTED: Outcome = { status: 415, code: 'unsupported_media_type' };
const INVALID: Outcome = { status: 400, code: 'invalid_request' };
const GET_ONLY: Outcome = { status: 405, code: 'method_not_allowed' };

/** A harness' listener of its management API. */
function managementListener(h: Harness): Listener {
  return { port: h.port, close: () => h.close() };
}

async function startMetrics(exposed: boolean, host: string): Promise<Listener> {
  const h = await startHarness();
  const app = await buildMetricsApp({ metrics: createServiceMetrics({ store: h.store }), store: h.store, exposed, logger: false });
  try {
    await app.listen({ host, port: 0 });
  } catch (err) {
    await h.close();
    throw err;
  }
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    port: address.port,
    async close() {
      await app.close();
      await h.close();
    },
  };
}

const metricsSurface = {
  publicPaths: ['/livez', '/readyz', '/metrics'],
  publicAllow: 'GET, HEAD',
  // No route of the metrics listener takes a body: a POST is read (so the body limit and the
  // JSON parser still apply), then refused for its method.
  bodyPath: '/metrics',
  jsonBody: () => ({ body: '{"a":1}', outcome: GET_ONLY }),
  otherMediaType: [GET_ONLY, UNSUPPORTED],
  bodyAtLimit: GET_ONLY,
} as const;

/** Every HTTP listener the project has. */
export const SURFACES: readonly SurfaceUnderAttack[] = [
  {
    name: 'management API',
    start: async () => managementListener(await startHarness()),
    publicPaths: ['/health', '/v1/openapi.json'],
    publicAllow: 'GET, HEAD',
    bodyPath: '/v1/auth/challenges',
    jsonBody: () => ({ body: JSON.stringify({ public_key: newDeviceKey().publicKeyHex }), outcome: { status: 201, code: null } }),
    otherMediaType: [UNSUPPORTED],
    bodyAtLimit: INVALID,
    loopbackOnly: true,
  },
  {
    name: 'node surface',
    async start(host = '127.0.0.1') {
      const h = await startNodeHarness({ nodeHost: host });
      return { port: Number(new URL(h.nodeBase).port), close: () => h.close() };
    },
    publicPaths: ['/.well-known/edge', '/edge/0-alpha/health'],
    publicAllow: 'GET, HEAD',
    bodyPath: '/edge/0-alpha/pairing/complete',
    // Well-formed, but no such intent: refused by the pairing check, not by the parser.
    jsonBody: () => ({
      body: JSON.stringify({
        intent_id: 'int_01M81B5H80VQ6PF8VXZGD22NT1',
        code: 'ABCD-EFGH-JKMN',
        public_key: newDeviceKey().publicKeyHex,
        signature: 'ab'.repeat(64),
      }),
      outcome: { status: 401, code: 'invalid_pairing_intent' },
    }),
    otherMediaType: [UNSUPPORTED],
    bodyAtLimit: INVALID,
    loopbackOnly: false,
  },
  {
    name: 'application gateway',
    async start(host = '127.0.0.1') {
      const h = await startGatewayHarness({
        gatewayHost: host,
        // The application behind it: two public routes that answer the same JSON every time.
        attach: async (app) => {
          app.get('/healthz', async () => ({ ok: true }));
          app.get('/public/*', async () => ({ public: true }));
        },
      });
      return { port: h.gatewayPort, close: () => h.close() };
    },
    publicPaths: ['/healthz', '/public/logo.svg'],
    publicAllow: 'GET, HEAD',
    // The application-realm sign-in: the same plugin and body rules as the management API's.
    bodyPath: '/.svc/auth/v1/challenges',
    jsonBody: () => ({ body: JSON.stringify({ public_key: newDeviceKey().publicKeyHex }), outcome: { status: 201, code: null } }),
    otherMediaType: [UNSUPPORTED],
    bodyAtLimit: INVALID,
    loopbackOnly: false,
  },
  { name: 'metrics listener', start: (host = '127.0.0.1') => startMetrics(false, host), ...metricsSurface, loopbackOnly: true },
  {
    name: 'metrics listener exposed by project.edn',
    start: (host = '127.0.0.1') => startMetrics(true, host),
    ...metricsSurface,
    loopbackOnly: false,
  },
];

/** {@link raw} against a listener. */
export function send(l: Listener, opts: Parameters<typeof raw>[1]): Promise<RawReply> {
  return raw(l, opts);
}

/** The status and error code of a reply. */
export function outcomeOf(r: RawReply): Outcome {
  return { status: r.status, code: r.body !== null && typeof r.body.code === 'string' && r.status >= 400 ? r.body.code : null };
}

/** Writes `request` as raw bytes to 127.0.0.1:`port` and resolves with everything read until the server closes. */
export function rawExchange(port: number, request: string, opts: { endAfterBody?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(request));
    let data = '';
    socket.on('data', (c) => {
      data += c.toString('utf8');
      // HTTP/1.1 keeps the connection open after an answer the server does not close itself.
      if (opts.endAfterBody === true && data.includes('}')) socket.end();
    });
    socket.on('end', () => resolve(data));
    socket.on('close', () => resolve(data));
    socket.on('error', reject);
  });
}

/** An IPv4 address of this machine that is not loopback, or undefined. */
export function networkAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return undefined;
}

/**
 * Declares `attack`'s tests once per surface of {@link SURFACES}, each suite against its own
 * listener on 127.0.0.1 (started before, closed after): `tests` reads it with `listener()`.
 */
export function againstEverySurface(attack: string, tests: (surface: SurfaceUnderAttack, listener: () => Listener) => void): void {
  for (const surface of SURFACES) {
    describe(`${attack}: ${surface.name}`, () => {
      let l: Listener | undefined;
      before(async () => {
        l = await surface.start();
      });
      after(() => l?.close());
      tests(surface, () => {
        if (l === undefined) throw new Error(`${surface.name} did not start`);
        return l;
      });
    });
  }
}
