import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type AuthDeps, type Principal, type RelayedSessionEnd, relayedSessionEnd } from '@svc/core';

/**
 * How long an `upgrade` listener told of a session's end has to close its websocket (1008 and
 * the close handshake) before the gateway destroys the connection itself.
 */
export const SESSION_END_CLOSE_GRACE_MS = 5_000;

/** One relayed upgrade whose session the gateway watches. */
interface Watch {
  readonly principal: Principal;
  readonly socket: Duplex;
  readonly listeners: ((reason: RelayedSessionEnd) => void)[];
  ended: boolean;
}

/** The watches by request: only {@link SessionWatcher.watch} writes it. */
const watches = new WeakMap<IncomingMessage, Watch>();

/**
 * Asks to be told when the session of an upgrade the gateway settled ends (logout, revocation
 * on any node sharing the store, device removal, refresh reuse, or the access token that opened
 * it expiring): `listener` gets the reason (core's `RelayedSessionEnd`: `session_revoked`,
 * `session_ended`, `token_expired`) and must close its websocket (code 1008, that reason). If no
 * listener asked, the gateway destroys the connection itself; if one did, it destroys it
 * {@link SESSION_END_CLOSE_GRACE_MS} after telling it. False when the upgrade is not watched
 * (a public path without a principal) or its session already ended.
 *
 * @example
 * onUpgradeSessionEnd(req, (reason) => ws.close(1008, reason));
 */
export function onUpgradeSessionEnd(req: IncomingMessage, listener: (reason: RelayedSessionEnd) => void): boolean {
  const watch = watches.get(req);
  if (watch === undefined || watch.ended) return false;
  watch.listeners.push(listener);
  return true;
}

/** The handle {@link createSessionWatcher} returns. */
export interface SessionWatcher {
  /** Watches the session of an upgrade that was let through with `principal`, until its socket closes. */
  watch(req: IncomingMessage, principal: Principal): void;
  /** Stops the re-checks (the gateway is closing). */
  close(): void;
}

/**
 * Re-checks, every `everyMs`, the session of every upgrade the gateway let through with a
 * principal, against the store (one read per session, however many websockets it holds), with
 * core's {@link relayedSessionEnd}: an ended session or an expired access token ends the
 * upgrade (see {@link onUpgradeSessionEnd}). A revocation anywhere, on any node sharing the
 * store, is seen within `everyMs` plus one store read. When the store cannot be read, only token
 * expiry is judged and the next round tries again. The timer runs only while something is
 * watched, and never keeps the process alive.
 *
 * @example
 * const watcher = createSessionWatcher(deps, 5_000);
 * watcher.watch(req, principal);
 */
export function createSessionWatcher(deps: Pick<AuthDeps, 'store' | 'clock' | 'log'>, everyMs: number): SessionWatcher {
  const active = new Set<Watch>();
  let timer: NodeJS.Timeout | undefined;
  let checking = false;

  const stop = () => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  const end = (watch: Watch, reason: RelayedSessionEnd) => {
    if (watch.ended) return;
    watch.ended = true;
    active.delete(watch);
    if (active.size === 0) stop();
    if (watch.listeners.length === 0) {
      watch.socket.destroy();
      return;
    }
    for (const listener of watch.listeners) {
      try {
        listener(reason);
      } catch (err) {
        deps.log.error({ err }, 'a websocket session-end listener failed');
      }
    }
    setTimeout(() => watch.socket.destroy(), SESSION_END_CLOSE_GRACE_MS).unref();
  };
  const check = async () => {
    if (checking) return;
    checking = true;
    try {
      const bySession = new Map<string, Watch[]>();
      for (const watch of active) {
        const list = bySession.get(watch.principal.session);
        if (list === undefined) bySession.set(watch.principal.session, [watch]);
        else list.push(watch);
      }
      await Promise.all(
        [...bySession].map(async ([id, list]) => {
          let session: Awaited<ReturnType<AuthDeps['store']['getSession']>> | undefined;
          try {
            session = await deps.store.getSession(id);
          } catch (err) {
            deps.log.warn({ err, event: 'gateway.websocket_session_check_failed' }, 'websocket session re-check could not read the store');
          }
          const now = deps.clock.now();
          for (const watch of list) {
            const reason = relayedSessionEnd(watch.principal, session, now);
            if (reason !== null) end(watch, reason);
          }
        }),
      );
    } finally {
      checking = false;
    }
  };

  return {
    watch(req, principal) {
      const watch: Watch = { principal, socket: req.socket, listeners: [], ended: false };
      watches.set(req, watch);
      active.add(watch);
      req.socket.once('close', () => {
        watch.ended = true;
        active.delete(watch);
        if (active.size === 0) stop();
      });
      if (timer === undefined) {
        timer = setInterval(() => void check(), everyMs);
        timer.unref();
      }
    },
    close() {
      stop();
      active.clear();
    },
  };
}
