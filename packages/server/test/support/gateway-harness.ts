import type { AppPathRequirement } from '@svc/core/config';
import type { FastifyInstance } from 'fastify';
import { buildGatewayApp, type GatewayAppOptions, type GatewayAttach, type GatewayPolicy, upstreamAttach } from '../../src/index.js';
import { api, type DeviceKey, type Harness, INJECT_BASE, listenOrReady, type Pair, type Reply } from './harness.js';
import { fixtureModule, moduleModeAttach } from './module-host.js';
import { adminToken, completion, type NodeHarness, type NodeHarnessOptions, nodeApi, prepare, startNodeHarness } from './node-harness.js';
import { startEchoUpstream, testIdentityHeaders } from './upstream-harness.js';

/** What an attach received, as the echo attach answers it. */
export interface Echo {
  readonly attach: string;
  readonly method: string;
  readonly url: string;
  /** `req.headers` as the attach saw it. */
  readonly headers: Record<string, string | string[]>;
  /** `req.raw.rawHeaders` as the attach saw it (what a proxy forwarding the raw list would send). */
  readonly rawHeaders: string[];
  /** `req.headersDistinct` as the attach saw it. */
  readonly headersDistinct: Record<string, string[]>;
  /** `request.principal`: the frozen principal, or null on a public path. */
  // biome-ignore lint/suspicious/noExplicitAny: inspected field by field
  readonly principal: any;
}

/**
 * A way of attaching the application behind the gateway, as the tests see it: something that
 * answers every path with an {@link Echo} of what the application received. The header
 * smuggling table and the other gateway tests run once per mode, so a new attach (the upstream
 * proxy to a real echo server, module mode) gets every test by being added to
 * {@link ATTACH_MODES}.
 */
export interface AttachMode {
  readonly name: string;
  /** Starts what the attach needs (an upstream server) and returns it, with how to stop it. */
  start(): Promise<{ readonly attach: GatewayAttach; close(): Promise<void> }>;
}

/** The in-process echo: a catch-all route in the attach's own context. */
export const echoAttach: GatewayAttach = async (app) => {
  app.all('/*', async (req) => ({
    attach: 'in-process echo',
    method: req.method,
    url: req.url,
    headers: req.headers,
    rawHeaders: req.raw.rawHeaders,
    headersDistinct: req.raw.headersDistinct,
    principal: req.principal,
  }));
};

/** Every attach mode the gateway tests run against. */
export const ATTACH_MODES: AttachMode[] = [
  {
    name: 'in-process echo',
    start: async () => ({ attach: echoAttach, close: async () => {} }),
  },
  {
    // Upstream mode: the real proxy to a real echo upstream on 127.0.0.1, which answers the same
    // Echo (the identity headers the gateway set are read back as the principal).
    name: 'upstream proxy',
    start: async () => {
      const up = await startEchoUpstream('attach');
      return { attach: upstreamAttach({ upstream: up.url, identityHeaders: testIdentityHeaders }), close: () => up.close() };
    },
  },
  {
    // Module mode: the same echo as an application module (fixtures/app-modules/echo-app), in its
    // confined process behind the module host's private socket.
    name: 'module mode',
    start: () => moduleModeAttach([fixtureModule('echo-app')]),
  },
];

/** The default policy of the tests: `/healthz` and `/public/*` public, an admin-only prefix. */
export function testPolicy(over: Partial<GatewayPolicy> = {}): GatewayPolicy {
  return {
    publicPaths: ['/healthz', '/public/*'],
    identityHeaders: ['x-tenant'],
    requirements: [],
    ...over,
  };
}

/** A requirement with every field absent unless given. */
export function requirement(path: string, over: Partial<Omit<AppPathRequirement, 'path'>> = {}): AppPathRequirement {
  return { path, subjects: null, groups: null, emailDomains: null, amr: null, maxAuthAgeSeconds: null, ...over };
}

/** The management API, the node surface and the gateway on 127.0.0.1, sharing one SQLite store and one fake clock. */
export interface GatewayHarness extends NodeHarness {
  readonly gateway: FastifyInstance;
  readonly gatewayBase: string;
  readonly gatewayPort: number;
}

export interface GatewayHarnessOptions extends NodeHarnessOptions {
  /** Where the gateway binds (default 127.0.0.1). */
  readonly gatewayHost?: string;
  readonly policy?: GatewayPolicy;
  readonly attach?: GatewayAttach;
  readonly gateway?: Partial<Omit<GatewayAppOptions, 'deps'>>;
}

/**
 * Builds and starts a gateway on 127.0.0.1:0 over `h`'s deps, or, with `socket: false`, makes
 * it ready for inject (port 0, base {@link INJECT_BASE}).
 */
export async function startGateway(
  h: Pick<Harness, 'deps'>,
  opts: Partial<Omit<GatewayAppOptions, 'deps'>> & { readonly host?: string; readonly socket?: boolean } = {},
): Promise<{ app: FastifyInstance; base: string; port: number; injected: boolean }> {
  const { host: _host, socket: _socket, ...rest } = opts;
  const app = await buildGatewayApp({
    deps: h.deps,
    logger: false,
    policy: opts.policy ?? testPolicy(),
    trustedProxies: opts.trustedProxies ?? [],
    ...rest,
  });
  const socket = opts.socket ?? true;
  const port = await listenOrReady(app, socket, opts.host ?? '127.0.0.1');
  return { app, base: socket ? `http://127.0.0.1:${port}` : INJECT_BASE, port, injected: !socket };
}

export async function startGatewayHarness(opts: GatewayHarnessOptions = {}): Promise<GatewayHarness> {
  const h = await startNodeHarness(opts);
  try {
    const g = await startGateway(h, {
      socket: !h.injected,
      ...(opts.gatewayHost === undefined ? {} : { host: opts.gatewayHost }),
      policy: opts.policy ?? testPolicy(),
      ...(opts.attach === undefined ? {} : { attach: opts.attach }),
      ...(opts.gateway ?? {}),
    });
    return {
      ...h,
      gateway: g.app,
      gatewayBase: g.base,
      gatewayPort: g.port,
      async close() {
        await g.app.close();
        await h.close();
      },
    };
  } catch (err) {
    await h.close();
    throw err;
  }
}

/** A gateway to send requests to: its origin, and (harness without a socket) the app to inject into. */
export interface GatewayTarget {
  readonly gatewayBase: string;
  readonly gateway?: FastifyInstance;
  readonly injected?: boolean;
}

/** A request to the gateway (the same helper as the management one, other base URL; injected when the harness has no socket). */
export function gatewayApi(
  h: GatewayTarget,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<Reply> {
  return api(
    { base: h.gatewayBase, ...(h.gateway === undefined ? {} : { app: h.gateway }), injected: h.injected ?? false },
    method,
    path,
    opts,
  );
}

/** Pairs a new application-realm device through the node surface (as an admin prepares it); returns its key and device id. */
export async function pairApplicationDevice(h: NodeHarness): Promise<{ key: DeviceKey; deviceId: string }> {
  const intent = await prepare(h, await adminToken(h), { realm: 'application' });
  const paired = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/complete', { body: completion(h, intent, intent.key) });
  if (paired.status !== 201) throw new Error(`pairing failed: ${paired.text}`);
  return { key: intent.key, deviceId: paired.body.device.id };
}

/** Challenge, signature, session at the gateway: an application-realm sign-in over HTTP. */
export async function applicationSignIn(h: GatewayTarget, key: DeviceKey): Promise<Pair> {
  const c = await gatewayApi(h, 'POST', '/.svc/auth/v1/challenges', { body: { public_key: key.publicKeyHex } });
  if (c.status !== 201) throw new Error(`challenge failed: ${c.text}`);
  const s = await gatewayApi(h, 'POST', '/.svc/auth/v1/sessions', {
    body: { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) },
  });
  if (s.status !== 201) throw new Error(`sign-in failed: ${s.text}`);
  return s.body as Pair;
}

/** A paired and signed-in application device. */
export async function applicationUser(h: GatewayHarness): Promise<{ key: DeviceKey; deviceId: string; pair: Pair }> {
  const { key, deviceId } = await pairApplicationDevice(h);
  return { key, deviceId, pair: await applicationSignIn(h, key) };
}
