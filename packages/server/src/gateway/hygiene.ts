import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AuthError, framingRefusal, unambiguousPath, upgradeRefusal } from '@svc/core';
import { writeRawProblem } from '../http/error-handling.js';
import { answerPending } from '../http/pipelining.js';
import { internalError, PROBLEM_CONTENT_TYPE, problemJson } from '../http/problem.js';
import { SECURITY_HEADERS } from '../http/security-headers.js';

/** The server events that carry a new request; the hygiene runs before any listener of them. */
const REQUEST_EVENTS = new Set(['request', 'checkContinue', 'checkExpectation', 'upgrade']);

/**
 * The events whose listeners would see a request before the identity step (which runs inside
 * Fastify's own 'request' listener): once sealed, only the listeners present then get them.
 * `upgrade` is not among them: its listeners run after the gateway's own identity gate.
 */
const SEALED_EVENTS = ['request', 'checkContinue', 'checkExpectation', 'connect'] as const;

type Listener = (...args: unknown[]) => void;

/** The handle {@link installHeaderHygiene} returns. */
export interface HeaderHygiene {
  /**
   * From now on, requests (and CONNECTs) go only to the listeners registered so far: a
   * listener added later (by code loaded into the application) never sees a request before
   * identity is settled. Call it once the gateway's own listeners are in place, before the attach.
   */
  seal(): void;
}

/**
 * Removes every header `drop` selects from a request, in every view Node keeps of it:
 * `rawHeaders` (what a proxy forwarding the raw list would send), `headers` and
 * `headersDistinct`. Whatever runs after sees none of them, however it reads headers.
 *
 * @example
 * removeHeaders(req, (name) => name.toLowerCase() === 'authorization');
 */
export function removeHeaders(req: IncomingMessage, drop: (name: string) => boolean): void {
  const raw = req.rawHeaders;
  let any = false;
  for (let i = 0; i < raw.length && !any; i += 2) any = drop(raw[i] as string);
  // The common case: nothing to remove, and Node's lazy header views are left unbuilt.
  if (!any) return;
  // Node builds `headers` and `headersDistinct` lazily from `rawHeaders` and the count of
  // headers it parsed: both are built (and cleaned) before the raw list shrinks.
  dropFields(req.headers, req.headersDistinct, raw, drop);
}

/**
 * Removes the fields `drop` selects from the three views Node keeps of one header or trailer
 * section: the parsed map, the map of every value, and the raw `[name, value, ...]` list
 * (shrunk in place, last, since Node builds the maps lazily from it).
 */
function dropFields(
  parsed: Record<string, unknown>,
  distinct: Record<string, unknown>,
  raw: string[],
  drop: (name: string) => boolean,
): void {
  for (const name of Object.keys(parsed)) if (drop(name)) delete parsed[name];
  for (const name of Object.keys(distinct)) if (drop(name)) delete distinct[name];
  let kept = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] as string;
    if (drop(name)) continue;
    raw[kept++] = name;
    raw[kept++] = raw[i + 1] as string;
  }
  raw.length = kept;
}

/**
 * {@link removeHeaders} for the trailer section of a chunked request, once it has arrived
 * (`rawTrailers`, `trailers`, `trailersDistinct`): a forged identity field cannot ride in after
 * the body either.
 */
function removeTrailers(req: IncomingMessage, drop: (name: string) => boolean): void {
  const raw = req.rawTrailers;
  if (raw.length === 0) return;
  dropFields(req.trailers, req.trailersDistinct, raw, drop);
}

/**
 * Why a raw request is refused before anything else sees it, or null: smuggling or ambiguous
 * framing ({@link framingRefusal}), an `upgrade` that is not a valid websocket handshake
 * ({@link upgradeRefusal}: nothing is sent upstream for it), or an ambiguous path
 * ({@link unambiguousPath}).
 */
function refusalOf(req: IncomingMessage, upgrade: boolean): AuthError | null {
  const framing = framingRefusal(req.rawHeaders, req.httpVersion);
  if (framing !== null) return new AuthError('invalid_request', `the request is refused as ambiguous framing: ${framing}`);
  if (upgrade) {
    const refused = upgradeRefusal({ method: req.method ?? '', httpVersion: req.httpVersion, headers: req.headers });
    if (refused !== null) return new AuthError('invalid_request', `the upgrade is refused: ${refused}`);
  }
  try {
    (req as CheckedRequest)[CHECKED_PATH] = unambiguousPath(req.url ?? '');
  } catch (err) {
    if (err instanceof AuthError) return err;
    throw err;
  }
  return null;
}

/**
 * Where the hygiene keeps the decoded path of a request it let through, so the identity step does
 * not parse it again: a property under a symbol only this module holds, not an entry of a
 * `WeakMap`, whose per-request entries the garbage collector must trace as ephemerons
 * (docs/performance.md, 2026-11-29 at 16:00). Nothing a client sends can set it, and only the
 * identity step and the upgrade gate read it, before any of the application's code runs.
 */
const CHECKED_PATH = Symbol('svc.gateway.checkedPath');
type CheckedRequest = IncomingMessage & { [CHECKED_PATH]?: string };

/**
 * The decoded, unambiguous path of `req` (see {@link unambiguousPath}): the one the hygiene
 * checked, or checked now for a request that did not come through it.
 *
 * @throws {AuthError} `invalid_request` when the path is ambiguous.
 * @example
 * const path = requestPath(req.raw); // '/docs/a b'
 */
export function requestPath(req: IncomingMessage): string {
  return (req as CheckedRequest)[CHECKED_PATH] ?? unambiguousPath(req.url ?? '');
}

/** A refusal as a page, for a browser: its body and the headers that go with it (content type, CSP). */
export interface RawRefusalPage {
  readonly body: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * Answers a refused raw request, and closes the connection: with the page `page` makes of it
 * for a browser, else problem+json; the security headers either way.
 */
function refuseResponse(
  req: IncomingMessage,
  res: ServerResponse,
  err: AuthError,
  page: ((req: IncomingMessage, err: AuthError) => RawRefusalPage | null) | undefined,
): void {
  const html = page?.(req, err) ?? null;
  const body = html === null ? JSON.stringify(problemJson(err)) : html.body;
  res.shouldKeepAlive = false;
  res.writeHead(err.status, {
    ...SECURITY_HEADERS,
    ...(html === null ? { 'content-type': PROBLEM_CONTENT_TYPE } : html.headers),
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}

/**
 * Refuses an upgrade on its socket. Whatever the client sends after its request head is read
 * and dropped: an upgraded socket is neither flowing nor paused, so unread bytes would keep it
 * from ever seeing the client's end, and the connection (and the server's close) would hang.
 */
function refuseUpgrade(socket: Duplex, err: AuthError): void {
  socket.resume();
  writeRawProblem(socket, err);
}

/**
 * The header hygiene of the application gateway, at the raw Node level so it runs before
 * routing, 404s, every Fastify hook and every `upgrade` listener (websockets), whenever they
 * were added: `server.emit` is wrapped, so no listener of a request event, not even one
 * prepended later, sees a request first. Each request is first checked for smuggling,
 * ambiguous framing and an ambiguous path (refused `400 invalid_request`, connection closed;
 * refused upgrades get the same answer written onto the socket), then every header `isIdentity`
 * selects is removed from `rawHeaders`, `headers` and `headersDistinct` (and, when the body
 * ends, from the trailers).
 *
 * The wrapped `emit` is not writable nor configurable, and {@link HeaderHygiene.seal} closes
 * the request events to listeners added later.
 *
 * @example
 * const hygiene = installHeaderHygiene(app.server, identityHeaderPredicate(policy.identityHeaders));
 * hygiene.seal(); // before the attach
 */
export function installHeaderHygiene(
  server: Server,
  isIdentity: (name: string) => boolean,
  opts: {
    /**
     * Runs on every clean `upgrade` before its listeners: a refusal is written onto the socket
     * and the listeners never see the request. Data the client sends meanwhile stays buffered
     * in the socket (Node leaves an upgraded socket neither flowing nor paused).
     */
    readonly upgradeGate?: (req: IncomingMessage) => Promise<AuthError | null>;
    /** Told of every request refused here (Fastify never sees them), e.g. to count it in the metrics. */
    readonly onRefused?: (req: IncomingMessage, refusal: AuthError) => void;
    /** The page a browser gets for a request refused here (null: problem+json), as the gateway's other refusals. */
    readonly page?: (req: IncomingMessage, refusal: AuthError) => RawRefusalPage | null;
  } = {},
): HeaderHygiene {
  const gate = opts.upgradeGate;
  const onRefused = opts.onRefused;
  const emit = server.emit as (this: Server, event: string | symbol, ...args: unknown[]) => boolean;
  /** After {@link HeaderHygiene.seal}: the only listeners of the events that carry a request before identity. */
  let sealed: ReadonlyMap<string, readonly Listener[]> | null = null;
  const dispatch = (self: Server, event: string, args: unknown[]): boolean => {
    if (sealed === null) return emit.call(self, event, ...args);
    const listeners = sealed.get(event) ?? [];
    if (listeners.length === 0) {
      // A listener added after the seal made Node emit this event instead of 'request': do
      // what Node does without one.
      if (event === 'checkContinue') {
        (args[1] as ServerResponse).writeContinue();
        return dispatch(self, 'request', args);
      }
      if (event === 'checkExpectation') {
        const res = args[1] as ServerResponse;
        res.writeHead(417);
        res.end();
        return true;
      }
      return false;
    }
    for (const listener of listeners) listener.apply(self, args);
    return true;
  };
  const wrapped = function (this: Server, event: string | symbol, ...args: unknown[]): boolean {
    if (typeof event !== 'string') return emit.call(this, event, ...args);
    if (event === 'connect') return dispatch(this, event, args);
    if (!REQUEST_EVENTS.has(event)) return emit.call(this, event, ...args);
    const req = args[0] as IncomingMessage;
    const refusal = refusalOf(req, event === 'upgrade');
    if (refusal !== null) {
      onRefused?.(req, refusal);
      if (event === 'upgrade') refuseUpgrade(args[1] as Duplex, refusal);
      else refuseResponse(req, args[1] as ServerResponse, refusal, opts.page);
      return true;
    }
    removeHeaders(req, isIdentity);
    if (event === 'upgrade') {
      const socket = args[1] as Duplex;
      // Node hands an upgrade over as soon as it is parsed, without waiting for the answers to
      // the requests written before it on the connection: behind one that closes the connection
      // it would run all the same (RFC 9112 §9.6), and beside one still to come its 101 would
      // overtake it. Refused, after those answers (`writeRawProblem`).
      if (answerPending(socket) || !socket.writable) {
        const refused = new AuthError('invalid_request', 'an upgrade must not be pipelined behind another request');
        onRefused?.(req, refused);
        refuseUpgrade(socket, refused);
        return true;
      }
      if (gate === undefined) return emit.call(this, event, ...args);
      gate(req).then(
        (refused) => {
          if (refused !== null) {
            onRefused?.(req, refused);
            refuseUpgrade(socket, refused);
          } else if (!socket.destroyed && socket.writable) emit.call(this, event, ...args);
          else socket.destroy();
        },
        (err: unknown) => {
          const failure = internalError(err);
          onRefused?.(req, failure);
          refuseUpgrade(socket, failure);
        },
      );
      return true;
    }
    // Trailers arrive with the end of the body: cleaned before any other 'end' listener runs.
    // Only a chunked body has a trailer section (and the framing rule admits no other
    // Transfer-Encoding): a request without one has nothing to clean.
    if (req.headers['transfer-encoding'] !== undefined) req.prependOnceListener('end', () => removeTrailers(req, isIdentity));
    return dispatch(this, event, args);
  };
  // Not writable, not configurable: code loaded later cannot take the hygiene out.
  Object.defineProperty(server, 'emit', { value: wrapped, writable: false, configurable: false, enumerable: false });
  return {
    seal() {
      const snapshot = new Map<string, readonly Listener[]>();
      for (const event of SEALED_EVENTS) snapshot.set(event, server.listeners(event) as Listener[]);
      sealed = snapshot;
    },
  };
}
