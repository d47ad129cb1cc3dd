// The confined side of module mode: the entry file of the child process that `startModuleHost`
// spawns under Node's permission model. It may import NOTHING but Node built-ins (and Fastify,
// by the file URL the service sends): the child may read only the application packages, their
// dependencies, Fastify's own files and this one file, so an import of @svc/core (or of anything
// else of the service) would be refused.
//
// Protocol on the pipes, newline-delimited JSON:
//   -> {"op": "init", "secret": "…", "fastify": "file:///…/fastify.js", "socket": "/…/app.sock",
//       "bodyLimit": 65536, "modules": [{"name": "good-app@1.0.0 (:web)", "entry": "file:///…", "exportName": "svcApp", "options": "<base64 v8>"}]}
//   <- {"op": "ready"}  or  {"op": "refused", "problem": "…"}
//   -> {"op": "ping", "id": 1}   <- {"op": "pong", "id": 1}
// The per-start secret arrives on stdin, never in the arguments or the environment (which is
// empty). The service forwards each request that passed its strip and authenticate steps over
// the unix socket, with the secret and the principal (base64url JSON) in two private headers;
// this gate checks the secret, takes both headers out of the request before any module code can
// see them, and defines `request.principal` (deep-frozen) read-only and non-configurable.
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { createInterface } from 'node:readline';
import type { Duplex } from 'node:stream';
import { deserialize } from 'node:v8';

/** The private headers of the service's forwarded requests (lower case, as Node gives them). */
const SECRET_HEADER = 'svc-module-key';
const PRINCIPAL_HEADER = 'svc-module-principal';
const MAX_ERROR_CHARS = 500;

/** The raw server events a module may neither listen to nor unhook (see the service's docs/gateway.md). */
const SEALED_SERVER_EVENTS = ['request', 'checkContinue', 'checkExpectation', 'connect', 'connection', 'secureConnection', 'clientError'];

interface InitMessage {
  readonly secret: string;
  readonly fastify: string;
  readonly socket: string;
  readonly bodyLimit: number;
  readonly modules: readonly { name: string; entry: string; exportName: string; options: string }[];
}

// Keep the real stdout for the protocol; everything else written to stdout (a module's
// console.log) goes to stderr, so a chatty module cannot corrupt its own channel.
const protocolWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;

function send(message: Record<string, unknown>): void {
  protocolWrite(`${JSON.stringify(message)}\n`);
}

function describe(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** Fastify's refusals of bad input, by code, as the contract's problem codes (the gateway's own table). */
const FASTIFY_ERRORS: Readonly<Record<string, readonly [string, number]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ['payload_too_large', 413],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: ['unsupported_media_type', 415],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: ['invalid_request', 400],
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid_request', 400],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['invalid_request', 400],
  FST_ERR_BAD_URL: ['invalid_request', 400],
};
const CODE_BY_STATUS: Readonly<Record<number, string>> = {
  404: 'not_found',
  405: 'method_not_allowed',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};
const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
};

/** What an error a module let through becomes: bad input stays a 4xx with its code, anything else a generic 500. */
function problemOf(err: unknown): { status: number; body: Record<string, unknown> } {
  const e = err as { code?: unknown; statusCode?: unknown; validation?: unknown; message?: unknown } | null;
  let status = 500;
  let code = 'internal_error';
  let detail = 'an unexpected error occurred';
  const known = typeof e?.code === 'string' ? FASTIFY_ERRORS[e.code] : undefined;
  if (known !== undefined) [code, status] = known;
  else if (e?.validation !== undefined) [code, status] = ['invalid_request', 400];
  else if (typeof e?.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    status = e.statusCode;
    code = CODE_BY_STATUS[status] ?? 'invalid_request';
  }
  if (status < 500) detail = typeof e?.message === 'string' ? e.message : 'the request was refused';
  return { status, body: { type: 'about:blank', title: TITLES[status] ?? 'Error', status, code, detail } };
}

let principals = new WeakMap<IncomingMessage, unknown>();

/**
 * The gate in front of every request and upgrade: the secret must match (timing-safe), then the
 * principal is taken from its header and both private headers leave `headers`,
 * `headersDistinct` and `rawHeaders`, so no module can see either. (Node builds the first two
 * lazily from `rawHeaders` with the count it parsed: they are built first, then all three
 * pruned.)
 */
function gate(secret: Buffer, req: IncomingMessage): boolean {
  const { headers, headersDistinct } = req;
  delete headers[SECRET_HEADER];
  delete headers[PRINCIPAL_HEADER];
  delete headersDistinct[SECRET_HEADER];
  delete headersDistinct[PRINCIPAL_HEADER];
  const raw = req.rawHeaders;
  let presented: string | undefined;
  let encoded: string | undefined;
  for (let i = raw.length - 2; i >= 0; i -= 2) {
    const name = (raw[i] ?? '').toLowerCase();
    if (name === SECRET_HEADER) presented = raw[i + 1];
    else if (name === PRINCIPAL_HEADER) encoded = raw[i + 1];
    else continue;
    raw.splice(i, 2);
  }
  if (presented === undefined || encoded === undefined) return false;
  const given = Buffer.from(presented, 'utf8');
  if (given.length !== secret.length || !timingSafeEqual(given, secret)) return false;
  let principal: unknown;
  try {
    principal = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    return false;
  }
  principals.set(req, deepFreeze(principal));
  return true;
}

function definePrincipal(target: object, principal: unknown): void {
  Object.defineProperty(target, 'principal', { value: principal, writable: false, configurable: false, enumerable: true });
}

/**
 * Fixes the raw server's request-carrying listeners and its `emit` (which gates upgrades), so a
 * module that reaches `app.server` or `request.raw.socket.server` can neither get in front of the
 * gate nor remove it: `on`, `prependListener`, `removeListener`, `removeAllListeners`, assigning
 * `emit` or `_events` all throw. Other events (`upgrade`, `listening`, `close`, `error`) stay free.
 */
function sealServer(server: Server): void {
  const target = server as unknown as { _events: Record<string | symbol, unknown>; emit: Server['emit'] };
  const events = target._events;
  for (const name of SEALED_SERVER_EVENTS) {
    const current = events[name];
    if (Array.isArray(current)) Object.freeze(current);
    Object.defineProperty(events, name, { value: current, writable: false, configurable: false, enumerable: current !== undefined });
  }
  Object.defineProperty(server, '_events', { value: events, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(server, 'emit', { value: target.emit, writable: false, configurable: false, enumerable: false });
}

type Plugin = (instance: unknown, opts: unknown, done: (err?: Error) => void) => unknown;

/** Calls a Fastify plugin directly, async or callback style (never through `register`: a skip-override mark lifts nothing). */
function callPlugin(plugin: Plugin, scope: unknown, options: unknown): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => (err ? reject(err) : resolve());
    let result: unknown;
    try {
      result = plugin.call(scope, scope, options, done);
    } catch (error) {
      reject(error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof (result as Promise<void>).then === 'function') {
      (result as Promise<void>).then(() => resolve(), reject);
    } else if (plugin.length < 3) resolve();
  });
}

interface FastifyLike {
  server: Server;
  decorateRequest(name: string, value: unknown): void;
  addHook(name: string, fn: (req: { raw: IncomingMessage }, reply: unknown, done: () => void) => void): void;
  removeAllContentTypeParsers(): void;
  getDefaultJsonParser(a: string, b: string): (req: unknown, body: string, done: (err: Error | null, body?: unknown) => void) => void;
  addContentTypeParser(
    type: string,
    opts: { parseAs: string; bodyLimit: number },
    fn: (
      req: { headers: Record<string, string | undefined> },
      body: string | Buffer,
      done: (err: Error | null, body?: unknown) => void,
    ) => void,
  ): void;
  setErrorHandler(
    fn: (err: unknown, req: unknown, reply: { code(n: number): { type(t: string): { send(b: unknown): unknown } } }) => unknown,
  ): void;
  setNotFoundHandler(fn: (req: unknown, reply: { code(n: number): { type(t: string): { send(b: unknown): unknown } } }) => unknown): void;
  register(fn: (scope: unknown) => Promise<void>): unknown;
  ready(): Promise<unknown>;
  listen(opts: { path: string }): Promise<unknown>;
  close(): Promise<unknown>;
}

/** Whether a `Content-Type` is JSON in UTF-8 (the gateway's rule): `application/json`, optionally `charset=utf-8`. */
function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const parts = value.toLowerCase().split(';');
  if (parts[0]?.trim() !== 'application/json') return false;
  return parts.slice(1).every((p) => p.trim() === 'charset=utf-8' || p.trim() === 'charset="utf-8"');
}

async function init(msg: InitMessage): Promise<void> {
  const secret = Buffer.from(msg.secret, 'utf8');
  const imported = (await import(msg.fastify)) as { default: (opts: object) => FastifyLike };
  const Fastify = imported.default;
  let gated: Server | null = null;
  const app = Fastify({
    logger: false,
    // Only the service reaches this socket: its X-Forwarded-For, -Proto and -Host (set fresh
    // from what the gateway believes) are what the module reads as `req.ip`, `protocol`, `host`.
    trustProxy: true,
    bodyLimit: msg.bodyLimit,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    requestIdHeader: false,
    serverFactory: (handler: RequestListener) => {
      const server = createServer((req, res) => {
        // Not the gateway (no secret, or a wrong one): no answer at all.
        if (!gate(secret, req)) {
          res.socket?.destroy();
          return;
        }
        handler(req, res);
      });
      // Upgrades (websockets): the same gate, then `req.principal` on the raw request, before any
      // module's `upgrade` listener runs.
      const emit = server.emit;
      server.emit = function gatedEmit(this: Server, event: string | symbol, ...args: unknown[]): boolean {
        if (event === 'upgrade') {
          const req = args[0] as IncomingMessage;
          if (!gate(secret, req)) {
            (args[1] as Duplex).destroy();
            return false;
          }
          definePrincipal(req, principals.get(req) ?? null);
        }
        return (emit as (this: Server, e: string | symbol, ...a: unknown[]) => boolean).call(this, event, ...args);
      } as Server['emit'];
      gated = server;
      return server;
    },
  });
  // `principal` is the gateway's: a module's decorateRequest('principal') is refused.
  app.decorateRequest('principal', null);
  app.addHook('onRequest', (req, _reply, done) => {
    definePrincipal(req, principals.get(req.raw) ?? null);
    done();
  });
  // The gateway's body rules, which modules ran under in-process: JSON only, 64 KiB, prototype
  // poisoning refused; problem+json for what a module does not handle itself.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: msg.bodyLimit }, (req, body, done) => {
    if (!isJsonContentType(req.headers['content-type'])) {
      done(Object.assign(new Error('bodies must be application/json in UTF-8'), { statusCode: 415 }));
      return;
    }
    parseJson(req, typeof body === 'string' ? body : body.toString('utf8'), done);
  });
  app.setErrorHandler((err, _req, reply) => {
    const { status, body } = problemOf(err);
    if (status >= 500) process.stderr.write(`application module error: ${describe(err)}\n`);
    return reply.code(status).type('application/problem+json').send(body);
  });
  app.setNotFoundHandler((_req, reply) =>
    reply
      .code(404)
      .type('application/problem+json')
      .send({ type: 'about:blank', title: 'Not Found', status: 404, code: 'not_found', detail: 'no such route' }),
  );
  if (gated === null) throw new Error('Fastify did not build its server through the factory');
  sealServer(gated);

  for (const m of msg.modules) {
    let plugin: unknown;
    try {
      const mod = (await import(m.entry)) as Record<string, unknown>;
      plugin = mod[m.exportName];
    } catch (err) {
      throw new Error(`application module ${m.name} failed to load: ${describe(err)}`);
    }
    if (typeof plugin !== 'function')
      throw new Error(`application module ${m.name}: its svc/app export "${m.exportName}" is not a Fastify plugin function`);
    if ((plugin as unknown as Record<symbol, unknown>)[Symbol.for('skip-override')] === true) {
      throw new Error(
        `application module ${m.name}: its :svc/app export "${m.exportName}" is marked skip-override (fastify-plugin), which asks to share the gateway's own context; export the plain plugin`,
      );
    }
    const options = deserialize(Buffer.from(m.options, 'base64')) as unknown;
    const run = async (scope: unknown): Promise<void> => {
      try {
        await callPlugin(plugin as Plugin, scope, options);
      } catch (error) {
        throw new Error(`application module ${m.name} failed to load: ${describe(error)}`);
      }
    };
    Object.defineProperty(run, Symbol.for('fastify.display-name'), { value: `svc/app ${m.name}` });
    app.register(run);
  }
  await app.ready();
  await app.listen({ path: msg.socket });
}

let started = false;
const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
lines.on('line', (line) => {
  let msg: { op?: unknown; id?: unknown } & Partial<InitMessage>;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.op === 'ping') {
    send({ op: 'pong', id: msg.id });
  } else if (msg.op === 'init' && !started) {
    started = true;
    principals = new WeakMap();
    init(msg as InitMessage).then(
      () => send({ op: 'ready' }),
      (err: unknown) => {
        send({ op: 'refused', problem: describe(err) });
        process.exit(1);
      },
    );
  }
});
// The service closed the channel: nothing more will be forwarded.
lines.on('close', () => process.exit(0));
