import { randomBytes } from 'node:crypto';
import { type AuthDeps, DPOP_NONCE_ROTATE_SECONDS, DPOP_NONCE_TTL_SECONDS, dpopNonceKey } from '@svc/core';
import type { FastifyInstance, onRequestHookHandler } from 'fastify';

/**
 * Server nonces for DPoP (RFC 9449 §8), for clients that want them: every answer to a request
 * that carried a `DPoP` proof (accepted or refused) has a `DPoP-Nonce` header. A client that
 * puts the latest one in its next proof's `nonce` claim limits how long a proof made ahead of
 * time could be used; a proof with a nonce no node issued (or one older than
 * {@link DPOP_NONCE_TTL_SECONDS}) is `401 use_dpop_nonce`, with a fresh nonce to retry with.
 * Proofs without a nonce are accepted as before.
 *
 * A node issues one nonce every {@link DPOP_NONCE_ROTATE_SECONDS} and records it in the store's
 * DPoP cache, so every node sharing the store accepts it: one store write per node per period,
 * one read per proof that carries a nonce.
 *
 * @example
 * hardenSurface(app, { loopbackOnly: true, dpopNonces: deps }); // installs it in its place
 */
export function installDpopNonces(app: FastifyInstance, deps: Pick<AuthDeps, 'store' | 'clock'>): void {
  let current: { readonly value: string; readonly issuedAt: number } | null = null;
  let pending: Promise<string> | null = null;
  /** The nonce of the period of `now`, or null when this node has issued none for it yet. */
  const issued = (now: number): string | null =>
    current !== null && now - current.issuedAt < DPOP_NONCE_ROTATE_SECONDS * 1000 && now >= current.issuedAt ? current.value : null;
  /** Issues the nonce of the period of `now` (recorded in the store first); one issue at a time. */
  const issue = (now: number): Promise<string> => {
    pending ??= (async () => {
      const value = randomBytes(24).toString('base64url');
      await deps.store.useDpopProof({ key: dpopNonceKey(value), expiresAt: now + DPOP_NONCE_TTL_SECONDS * 1000, now });
      current = { value, issuedAt: now };
      return value;
    })().finally(() => {
      pending = null;
    });
    return pending;
  };
  // One `onRequest` hook, installed by `hardenSurface` right after the pipelining guard, so that
  // every answer after it (the DNS-rebinding guard's refusals, 404s, the routes' own) carries the
  // nonce, and read before the gateway's identity step removes the header. Not an `onSend` hook: a
  // surface with none skips Fastify's onSend runner on every answer (docs/performance.md,
  // 2026-11-29 at 16:00). It takes Fastify's callback: an async hook costs every request a promise
  // and a turn of the microtask queue, and nearly every request carries no proof.
  app.addHook('onRequest', ((req, reply, done) => {
    if (req.headers.dpop === undefined) {
      done();
      return;
    }
    const now = deps.clock.now();
    const ready = issued(now);
    if (ready !== null) {
      reply.header('dpop-nonce', ready);
      done();
      return;
    }
    // Returned, not handed to `done`: Fastify's hook runner then sends whatever the rest of the
    // request throws to the error path, where a throw inside a promise callback of this hook's own
    // would go unhandled and take the process down.
    return issue(now).then(
      (value) => {
        reply.header('dpop-nonce', value);
      },
      // The store is failing: the answer goes without a nonce (the request's own outcome says why).
      () => undefined,
    );
  }) as onRequestHookHandler);
}
