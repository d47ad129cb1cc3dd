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
 * Caps the connections of `app`'s listener in total and per peer address, so idle or slow
 * sockets to one listener cannot starve another listener of the same process (the file
 * descriptors and memory are shared): the `maxConnections` cap is Node's own (a connection
 * accepted beyond it is destroyed at once); the per-peer cap counts the open sockets of each
 * remote address and destroys a new one over the limit before any byte of it is read. The
 * timeouts that close idle and slow sockets are in `serverOptions`. Call before `listen`.
 *
 * @example
 * installConnectionLimits(app, NODE_CONNECTION_LIMITS);
 */
export function installConnectionLimits(app: FastifyInstance, limits: ConnectionLimits): void {
  const server = app.server;
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
