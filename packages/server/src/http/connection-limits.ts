import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** The connection caps and timeouts of one listener. */
export interface ConnectionLimits {
  /** Open connections this listener keeps at most; Node closes any connection accepted beyond it. */
  readonly maxConnections: number;
  /** Open connections one peer address may hold; beyond it a new one is closed at once. */
  readonly maxConnectionsPerPeer: number;
}

/** The node surface: may face the network, so it gets a small share of the process's sockets. */
export const NODE_CONNECTION_LIMITS: ConnectionLimits = Object.freeze({ maxConnections: 256, maxConnectionsPerPeer: 32 });

/**
 * The application gateway: faces the application's callers, often behind one reverse proxy
 * (a single peer address holding many connections), so it gets the largest share.
 */
export const APPLICATION_CONNECTION_LIMITS: ConnectionLimits = Object.freeze({ maxConnections: 1024, maxConnectionsPerPeer: 256 });

/**
 * The management API: loopback only, so every peer is this machine and a per-peer cap would
 * be the total. Its own listener and its own budget, so a flood of the node surface (capped
 * above) can never use up the descriptors the management API needs.
 */
export const MANAGEMENT_CONNECTION_LIMITS: ConnectionLimits = Object.freeze({ maxConnections: 128, maxConnectionsPerPeer: 128 });

/**
 * The metrics listener: a scraper or two, and it may face the network. It has no share in
 * {@link planConnectionLimits}: its few connections fit in the reserve (at least the 32
 * descriptors kept beyond those open at start), so a flood of it cannot take the descriptors of
 * the management API and the node surface.
 */
export const METRICS_CONNECTION_LIMITS: ConnectionLimits = Object.freeze({ maxConnections: 16, maxConnectionsPerPeer: 8 });

/** The least pace a request body must keep: averaged over each window, once the body has begun. */
export interface UploadRateFloor {
  readonly bytesPerSecond: number;
  readonly windowMs: number;
}

/**
 * 1 KiB/s over every 10 s window. A body that trickles a few bytes at a time is never silent,
 * so the idle timeout never cuts it, and the gateway sets no deadline on a whole request
 * (large uploads take as long as they keep moving): without a floor, a caller holds a slot of
 * the cap (and, proxied, an upstream socket) for as long as it likes.
 */
export const UPLOAD_RATE_FLOOR: UploadRateFloor = Object.freeze({ bytesPerSecond: 1024, windowMs: 10_000 });

/**
 * Caps the connections of `app`'s listener in total and per peer address, so idle or slow
 * sockets to one listener cannot starve another listener of the same process (the file
 * descriptors and memory are shared): the `maxConnections` cap is Node's own (a connection
 * accepted beyond it is destroyed at once); the per-peer cap counts the open sockets of each
 * remote address and destroys a new one over the limit before any byte of it is read. A
 * request body slower than `floor` (default {@link UPLOAD_RATE_FLOOR}) over a whole window has
 * its connection destroyed. The timeouts that close idle and slow sockets are in
 * `serverOptions`. Call before `listen`.
 *
 * @example
 * installConnectionLimits(app, NODE_CONNECTION_LIMITS);
 */
export function installConnectionLimits(app: FastifyInstance, limits: ConnectionLimits, floor: UploadRateFloor = UPLOAD_RATE_FLOOR): void {
  const server = app.server;
  installUploadRateFloor(server, floor);
  server.maxConnections = limits.maxConnections;
  // A client that sends its request and then its FIN (done sending, still reading) must get
  // the answer: by default Node ends the socket on the FIN, so a request that was still running
  // (a proxied one, already sent upstream) lost its response. With half-open allowed, Node
  // answers every request it read and then closes (`_last`, then `destroySoon`). Node has no
  // public option for it; the property is read on every FIN (lib/_http_server.js socketOnEnd).
  (server as typeof server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  const perPeer = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress ?? '';
    const open = perPeer.get(peer) ?? 0;
    if (open >= limits.maxConnectionsPerPeer) {
      socket.destroy();
      return;
    }
    perPeer.set(peer, open + 1);
    socket.once('close', () => {
      const left = (perPeer.get(peer) ?? 1) - 1;
      if (left <= 0) perPeer.delete(peer);
      else perPeer.set(peer, left);
    });
  });
}

/**
 * Destroys the connection of a request whose body moves slower than `floor` over a whole
 * window, once its head is in. Counted from the socket's bytes read, checked every second
 * for each request that is at least a window into its body. A window in which the body's
 * bytes are waiting to be consumed (the handler or the upstream is the slow side) is not
 * held against the client.
 */
function installUploadRateFloor(server: FastifyInstance['server'], floor: UploadRateFloor): void {
  const least = (floor.bytesPerSecond * floor.windowMs) / 1000;
  const uploads = new Map<IncomingMessage, { readonly socket: Socket; bytes: number; since: number }>();
  server.on('request', (req: IncomingMessage) => {
    // Only requests that announce a body (no per-request cost on the rest).
    const length = req.headers['content-length'];
    if (req.complete || ((length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined)) return;
    uploads.set(req, { socket: req.socket, bytes: req.socket.bytesRead, since: performance.now() });
    const done = () => uploads.delete(req);
    req.once('end', done);
    req.once('close', done);
  });
  let sweep: NodeJS.Timeout | undefined;
  server.on('listening', () => {
    clearInterval(sweep);
    sweep = setInterval(() => {
      const now = performance.now();
      for (const [req, u] of uploads) {
        if (req.complete || u.socket.destroyed) {
          uploads.delete(req);
          continue;
        }
        if (now - u.since < floor.windowMs) continue;
        const read = u.socket.bytesRead;
        const moved = read - u.bytes;
        u.bytes = read;
        u.since = now;
        if (moved < least && req.readableLength === 0) {
          uploads.delete(req);
          u.socket.destroy();
        }
      }
    }, 1_000);
    sweep.unref();
  });
  server.on('close', () => clearInterval(sweep));
}

/** The process's open-file limit (RLIMIT_NOFILE); `Infinity` for `unlimited`. */
export interface DescriptorLimit {
  readonly soft: number;
  readonly hard: number;
}

/**
 * The `Max open files` line of a `/proc/<pid>/limits` text, or null when it has none.
 *
 * @example
 * parseDescriptorLimit('Max open files            1024                 524288               files'); // { soft: 1024, hard: 524288 }
 */
export function parseDescriptorLimit(procLimits: string): DescriptorLimit | null {
  const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(procLimits);
  if (m === null) return null;
  const value = (v: string | undefined) => (v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v));
  return { soft: value(m[1]), hard: value(m[2]) };
}

/**
 * This process's descriptor limit, read from `/proc/self/limits` (Linux), or null where there
 * is none. Node itself raises the soft limit to the hard one when it starts, so the soft value
 * read here is what the process may really open; a process cannot raise its hard limit.
 *
 * @example
 * readDescriptorLimit()?.soft; // 1048576 in a default container, 524288 under systemd
 */
export function readDescriptorLimit(): DescriptorLimit | null {
  try {
    return parseDescriptorLimit(readFileSync('/proc/self/limits', 'utf8'));
  } catch {
    return null;
  }
}

/**
 * How many descriptors this process has open now (Linux), or null where it cannot tell.
 *
 * @example
 * const reserve = Math.max(DESCRIPTOR_RESERVE, (openDescriptors() ?? 0) + 32);
 */
export function openDescriptors(): number | null {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return null;
  }
}

/** Connections the gateway keeps to its upstream at most by default (reply-from's own default); further proxied requests wait for one. */
export const DEFAULT_UPSTREAM_CONNECTIONS = 128;

/** Descriptors kept for everything but the listeners' connections: the store, logs, key files, provider pipes, Node's own. */
export const DESCRIPTOR_RESERVE = 64;

/** The smallest descriptor limit the service starts with: below it not even reduced caps fit. */
export const MIN_DESCRIPTOR_LIMIT = 128;

/** The caps of each listener and of the gateway's upstream pool, sized to the descriptor limit. */
export interface ConnectionPlan {
  /** The limit the plan was made for, or null when unknown (the defaults then). */
  readonly descriptors: number | null;
  /** Descriptors set aside for the rest of the process. */
  readonly reserve: number;
  readonly management: ConnectionLimits;
  readonly node: ConnectionLimits;
  readonly application: ConnectionLimits;
  /** Connections the gateway keeps to its upstream at most (each proxied request holds one). */
  readonly upstreamConnections: number;
  /** Whether the limit made any cap smaller than its default. */
  readonly reduced: boolean;
}

/**
 * The descriptor limit at which every default cap fits, with `reserve` set aside.
 *
 * @example
 * descriptorsForDefaults(); // 1600: 64 + 128 + 256 + 1024 + 128
 */
export function descriptorsForDefaults(reserve = DESCRIPTOR_RESERVE): number {
  return (
    reserve +
    MANAGEMENT_CONNECTION_LIMITS.maxConnections +
    NODE_CONNECTION_LIMITS.maxConnections +
    APPLICATION_CONNECTION_LIMITS.maxConnections +
    DEFAULT_UPSTREAM_CONNECTIONS
  );
}

/**
 * Sizes the connection caps of the listeners that run (and the gateway's upstream pool) so
 * that, all full at once, they fit the descriptor limit with `reserve` left over: the
 * management API and the node surface get their own shares first (an eighth and a quarter of
 * what is left, at most their defaults), so no gateway flood can take the descriptors they
 * need; the gateway's upstream pool gets at most half of the rest (each proxied request holds
 * one upstream socket while it runs) and its listener the remainder. With an unknown or large
 * limit, the defaults. Pure.
 *
 * @throws {RangeError} when the limit is below {@link MIN_DESCRIPTOR_LIMIT} or leaves no room past `reserve`.
 * @example
 * planConnectionLimits(256, { management: true, node: true, application: true }).application.maxConnections; // 60 (and 60 upstream)
 */
export function planConnectionLimits(
  descriptors: number | null,
  listeners: { readonly management: boolean; readonly node: boolean; readonly application: boolean },
  reserve = DESCRIPTOR_RESERVE,
): ConnectionPlan {
  const defaults = {
    descriptors,
    reserve,
    management: MANAGEMENT_CONNECTION_LIMITS,
    node: NODE_CONNECTION_LIMITS,
    application: APPLICATION_CONNECTION_LIMITS,
    upstreamConnections: DEFAULT_UPSTREAM_CONNECTIONS,
    reduced: false,
  };
  if (descriptors === null || !Number.isFinite(descriptors)) return defaults;
  if (descriptors < MIN_DESCRIPTOR_LIMIT || descriptors - reserve < MIN_DESCRIPTOR_LIMIT / 2) {
    throw new RangeError(
      `the open-file limit is ${descriptors}, too small to serve (at least ${Math.max(MIN_DESCRIPTOR_LIMIT, reserve + MIN_DESCRIPTOR_LIMIT / 2)})`,
    );
  }
  const available = descriptors - reserve;
  const management = listeners.management ? Math.min(MANAGEMENT_CONNECTION_LIMITS.maxConnections, Math.floor(available / 8)) : 0;
  const node = listeners.node ? Math.min(NODE_CONNECTION_LIMITS.maxConnections, Math.floor(available / 4)) : 0;
  const rest = available - management - node;
  const upstream = Math.min(DEFAULT_UPSTREAM_CONNECTIONS, Math.floor(rest / 2));
  const application = Math.min(APPLICATION_CONNECTION_LIMITS.maxConnections, rest - upstream);
  const limits = (max: number, base: ConnectionLimits): ConnectionLimits =>
    Object.freeze({
      maxConnections: Math.max(1, max),
      maxConnectionsPerPeer: Math.max(
        1,
        Math.min(base.maxConnectionsPerPeer, Math.floor((max * base.maxConnectionsPerPeer) / base.maxConnections)),
      ),
    });
  const plan = {
    descriptors,
    reserve,
    management: listeners.management ? limits(management, MANAGEMENT_CONNECTION_LIMITS) : MANAGEMENT_CONNECTION_LIMITS,
    node: listeners.node ? limits(node, NODE_CONNECTION_LIMITS) : NODE_CONNECTION_LIMITS,
    application: listeners.application ? limits(application, APPLICATION_CONNECTION_LIMITS) : APPLICATION_CONNECTION_LIMITS,
    upstreamConnections: Math.max(1, upstream),
  };
  return {
    ...plan,
    reduced:
      plan.management.maxConnections < MANAGEMENT_CONNECTION_LIMITS.maxConnections ||
      plan.node.maxConnections < NODE_CONNECTION_LIMITS.maxConnections ||
      plan.application.maxConnections < APPLICATION_CONNECTION_LIMITS.maxConnections ||
      plan.upstreamConnections < DEFAULT_UPSTREAM_CONNECTIONS,
  };
}
