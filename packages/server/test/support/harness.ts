import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type AuthDeps, issueBootstrapToken, publicKeyHexOf, silentLogger } from '@svc/core';
import { type AuthSettings, DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import { createMemoryStore } from '@svc/store-testkit';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { openSqliteStore, type SqliteStoreOptions } from 'svc-store-sqlite';
import { buildManagementApp, type ManagementAppOptions } from '../../src/index.js';

/** 2026-11-22T10:00:00.000Z. */
export const START = Date.UTC(2026, 10, 22, 10, 0, 0, 0);

/** A clock that moves only when a test says so: a wall clock and a monotonic one. */
export interface FakeClock {
  now(): number;
  monotonic(): number;
  /** Time passes: both clocks move on by `ms`. */
  advance(ms: number): void;
  /** The system clock is stepped (by an operator, NTP): only the wall clock jumps, by `ms` (negative: back). */
  step(ms: number): void;
}

export function createFakeClock(start = START): FakeClock {
  let t = start;
  let mono = 0;
  return {
    now: () => t,
    monotonic: () => mono,
    advance(ms: number) {
      t += ms;
      mono += ms;
    },
    step(ms: number) {
      t += ms;
    },
  };
}

/**
 * The harness's one departure from the defaults: sessions are bearer sessions
 * (`:auth/sender-constraint :off`), so the tests of other properties (rotation, grace, rate
 * limits) can present a refresh token bare. The DPoP tests ask for `:refresh` or `:required`
 * themselves; the CLI tests run the real default end to end.
 */
export const BEARER_TEST_SETTINGS: Pick<AuthSettings, 'senderConstraint'> = Object.freeze({
  senderConstraint: Object.freeze({ management: 'off', application: 'off' } as const),
});

/**
 * A management API with a real SQLite control store in a 0700 temp dir (or, `store: 'memory'`,
 * the in-memory reference store): listening on
 * 127.0.0.1, or (`socket: false`) not listening at all, every request of {@link api} going
 * through Fastify's `inject()` (the fast tier: no socket, no port; `port` is then 0).
 */
export interface Harness {
  readonly app: FastifyInstance;
  readonly port: number;
  /** The origin requests are made to: `http://127.0.0.1:<port>`, or `http://127.0.0.1` without a socket (its `Host` for inject). */
  readonly base: string;
  /** Whether requests go through `app.inject()` (started with `socket: false`) rather than over a socket. */
  readonly injected: boolean;
  readonly deps: AuthDeps;
  readonly clock: FakeClock;
  readonly store: Store;
  /** The directory of the control database. */
  readonly dir: string;
  close(): Promise<void>;
}

export interface HarnessOptions {
  settings?: Partial<AuthSettings>;
  logger?: FastifyBaseLogger | false;
  /** Wraps the store, e.g. to pause or break an operation. */
  wrapStore?: (store: Store) => Store;
  /** The (0700) directory of the control database; default a fresh temporary one. Removed by close(). */
  dir?: string;
  /** Options of the SQLite store besides its file. */
  storeOptions?: Omit<SqliteStoreOptions, 'file'>;
  /**
   * The control store: a real SQLite file in `dir` (default), or store-testkit's in-memory
   * reference store (the fast tier, where the store is not the subject; `dir` is then still
   * made, empty, for the files a test writes beside it).
   */
  store?: 'sqlite' | 'memory';
  /**
   * Whether the app listens on 127.0.0.1 (default true). Without a socket, {@link api} injects
   * requests: for every route test where the socket is not the subject.
   */
  socket?: boolean;
  /** What the management app gets beyond the store (the console's providers, the checkpoint source). */
  management?: Pick<ManagementAppOptions, 'console' | 'auditCheckpoints'>;
}

/** The origin of a harness that does not listen: what {@link api} sends as `Host` through inject. */
export const INJECT_BASE = 'http://127.0.0.1';

/**
 * Starts `app` as a harness asks: listening on `host`:0 and answering its port, or (without a
 * socket) ready for `inject()` with port 0.
 *
 * @example
 * const port = await listenOrReady(app, opts.socket ?? true);
 */
export async function listenOrReady(app: FastifyInstance, socket: boolean, host = '127.0.0.1'): Promise<number> {
  if (!socket) {
    await app.ready();
    return 0;
  }
  await app.listen({ host, port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'svc-server-test-'));
  const real: Store =
    opts.store === 'memory' ? createMemoryStore() : await openSqliteStore({ ...(opts.storeOptions ?? {}), file: join(dir, 'control.db') });
  const store = opts.wrapStore ? opts.wrapStore(real) : real;
  const clock = createFakeClock();
  const deps: AuthDeps = {
    store,
    clock,
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000SERVERTESTPRJ0',
    settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS, ...BEARER_TEST_SETTINGS, ...(opts.settings ?? {}) }),
  };
  await store.initProject({ projectId: deps.projectId, createdAt: clock.now() });
  const app = await buildManagementApp({ deps, logger: opts.logger ?? false, ...(opts.management ?? {}) });
  const socket = opts.socket ?? true;
  const port = await listenOrReady(app, socket);
  return {
    app,
    port,
    base: socket ? `http://127.0.0.1:${port}` : INJECT_BASE,
    injected: !socket,
    deps,
    clock,
    store,
    dir,
    async close() {
      await app.close();
      await real.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** An Ed25519 device key pair. */
export interface DeviceKey {
  readonly publicKeyHex: string;
  readonly privateKey: KeyObject;
  signHex(message: string): string;
}

export function newDeviceKey(): DeviceKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKeyHex: publicKeyHexOf(publicKey),
    privateKey,
    signHex: (message) => sign(null, Buffer.from(message, 'utf8'), privateKey).toString('hex'),
  };
}

/** A parsed response. */
export interface Reply {
  readonly status: number;
  readonly headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  readonly body: any;
  readonly text: string;
}

/** Where {@link api} sends a request: an origin, and the app to inject into when `injected`. */
export interface Target {
  readonly base: string;
  readonly app?: FastifyInstance;
  readonly injected?: boolean;
}

/**
 * A JSON request: `body` is JSON-encoded, `token` becomes a bearer header. Over a socket with
 * fetch, or, to a harness started without a socket, through `app.inject()` with the same
 * headers fetch would add (so a route sees the same request either way) and `Host` from `base`.
 *
 * @example
 * const r = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
 */
export async function api(
  h: Target,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  let body: string | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
  if (h.injected === true) {
    if (h.app === undefined) throw new TypeError('api: an injected target needs its app');
    return parsed(await injectAs(h.app, h.base, method, path, headers, body));
  }
  const res = await fetch(h.base + path, { method, headers, ...(body === undefined ? {} : { body }) });
  return parsed({ status: res.status, headers: res.headers, text: await res.text() });
}

/** The headers fetch adds to every request (undici), added by inject too unless the test set them. */
const FETCH_HEADERS: Readonly<Record<string, string>> = {
  accept: '*/*',
  'accept-language': '*',
  'sec-fetch-mode': 'cors',
  'user-agent': 'node',
  'accept-encoding': 'gzip, deflate',
};

/**
 * The class `inject()` makes its requests from (light-my-request's own, with this as its
 * parent): it adds the one view of a request's headers Node's `IncomingMessage` has and
 * light-my-request's has not, `headersDistinct` (every value of every field, by lower-case
 * name). The gateway's header hygiene cleans that view too, so the gateway can be injected.
 * Built once from `rawHeaders`, then kept, so a deletion in it stays (as in Node); kept beside
 * the request, since light-my-request copies this class's prototype without running its constructor.
 */
class InjectedRequest extends Readable {
  declare rawHeaders: string[];
  get headersDistinct(): Record<string, string[]> {
    let distinct = DISTINCT.get(this);
    if (distinct === undefined) {
      distinct = {};
      for (let i = 0; i + 1 < this.rawHeaders.length; i += 2) {
        const name = (this.rawHeaders[i] as string).toLowerCase();
        const values = distinct[name] ?? [];
        values.push(this.rawHeaders[i + 1] as string);
        distinct[name] = values;
      }
      DISTINCT.set(this, distinct);
    }
    return distinct;
  }
}
const DISTINCT = new WeakMap<InjectedRequest, Record<string, string[]>>();

/**
 * One request through `app.inject()`, as fetch would send it to `base`: its `Host`, its
 * default headers. Like the sockets' `api` with its default `redirect: 'follow'`, a redirect
 * would differ (inject never follows one): a test that needs that keeps its socket.
 */
async function injectAs(
  app: FastifyInstance,
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<{ status: number; headers: Headers; text: string }> {
  const sent: Record<string, string> = { host: new URL(base).host };
  for (const [name, value] of Object.entries(FETCH_HEADERS)) sent[name] = value;
  for (const [name, value] of Object.entries(headers)) sent[name.toLowerCase()] = value;
  const res = await app.inject({
    method: method as 'GET',
    url: path,
    headers: sent,
    Request: InjectedRequest,
    ...(body === undefined ? {} : { payload: body }),
  });
  const out = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, String(v));
  }
  return { status: res.statusCode, headers: out, text: res.payload };
}

/** A response with its body parsed as JSON (null when empty or not JSON). */
function parsed(res: { status: number; headers: Headers; text: string }): Reply {
  const { text } = res;
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: res.status, headers: res.headers, body, text };
}

/** A raw node:http response. */
export interface RawReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  readonly body: any;
  readonly text: string;
}

/**
 * A request with node:http, for what fetch does not allow: forged `Host`, HTTP/1.0, chunked
 * bodies. `chunks` are written one by one with chunked transfer encoding.
 */
export function raw(
  h: Pick<Harness, 'port'>,
  opts: {
    method?: string;
    path: string;
    headers?: Record<string, string | number>;
    body?: string | Buffer;
    chunks?: (string | Buffer)[];
    setHost?: boolean;
    /** The address to connect to (default 127.0.0.1). */
    host?: string;
  },
): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: opts.host ?? '127.0.0.1',
        port: h.port,
        method: opts.method ?? 'GET',
        path: opts.path,
        headers: opts.headers ?? {},
        setHost: opts.setHost ?? true,
        agent: false,
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          const text = Buffer.concat(parts).toString('utf8');
          let parsed: unknown = null;
          try {
            parsed = text === '' ? null : JSON.parse(text);
          } catch {
            parsed = null;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
        });
        res.on('error', reject);
      },
    );
    // The server may answer (413, 415) and close before the whole body is written.
    req.on('error', reject);
    if (opts.chunks !== undefined) {
      for (const c of opts.chunks) req.write(c);
      req.end();
    } else {
      req.end(opts.body);
    }
  });
}

/** Issues a bootstrap token through core, as `svc auth init` does. */
export async function bootstrapToken(h: Harness): Promise<string> {
  return (await issueBootstrapToken(h.deps, { recovery: true })).token;
}

/** Enrolls a new management device key through the API. */
export async function enroll(h: Harness, key: DeviceKey = newDeviceKey()): Promise<{ key: DeviceKey; deviceId: string }> {
  const token = await bootstrapToken(h);
  const r = await api(h, 'POST', '/v1/auth/enroll', { body: { bootstrap_token: token, public_key: key.publicKeyHex } });
  if (r.status !== 201) throw new Error(`enroll failed: ${r.text}`);
  return { key, deviceId: r.body.device.id };
}

/** A TokenPair as the API returns it. */
export interface Pair {
  session_id: string;
  access_token: string;
  refresh_token: string;
  expires_in: number;
  refresh_expires_in: number;
  realm: string;
  token_type: string;
}

/** Challenge, signature, session: a signed-in management device (sending `headers` with the sign-in, e.g. a `user-agent`). */
export async function signIn(h: Harness, key: DeviceKey, headers: Record<string, string> = {}): Promise<Pair> {
  const c = await api(h, 'POST', '/v1/auth/challenges', { body: { public_key: key.publicKeyHex } });
  if (c.status !== 201) throw new Error(`challenge failed: ${c.text}`);
  const s = await api(h, 'POST', '/v1/auth/sessions', {
    body: { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) },
    headers,
  });
  if (s.status !== 201) throw new Error(`sign-in failed: ${s.text}`);
  return s.body as Pair;
}

/** Enrolls a fresh device and signs it in. */
export async function admin(h: Harness): Promise<{ key: DeviceKey; deviceId: string; pair: Pair }> {
  const { key, deviceId } = await enroll(h);
  return { key, deviceId, pair: await signIn(h, key) };
}
