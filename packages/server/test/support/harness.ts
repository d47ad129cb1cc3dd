import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AuthDeps, issueBootstrapToken, publicKeyHexOf, silentLogger } from '@svc/core';
import { type AuthSettings, DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { openSqliteStore, type SqliteStoreOptions } from 'svc-store-sqlite';
import { buildManagementApp } from '../../src/index.js';

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

/** A running management API on 127.0.0.1 with a real SQLite control store in a 0700 temp dir. */
export interface Harness {
  readonly app: FastifyInstance;
  readonly port: number;
  readonly base: string;
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
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'svc-server-test-'));
  const real = await openSqliteStore({ ...(opts.storeOptions ?? {}), file: join(dir, 'control.db') });
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
  const app = await buildManagementApp({ deps, logger: opts.logger ?? false });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    app,
    port: address.port,
    base: `http://127.0.0.1:${address.port}`,
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

/** A JSON request with fetch: `body` is JSON-encoded, `token` becomes a bearer header. */
export async function api(
  h: Harness,
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
  const res = await fetch(h.base + path, { method, headers, ...(body === undefined ? {} : { body }) });
  const text = await res.text();
  let parsed: unknown = null;
  try {
    parsed = text === '' ? null : JSON.parse(text);
  } catch {
    parsed = null;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
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
