import { randomBytes } from 'node:crypto';
import { type AuthDeps, DPOP_NONCE_ROTATE_SECONDS, DPOP_NONCE_TTL_SECONDS, dpopNonceKey } from '@svc/core';
import type { FastifyInstance, onSendHookHandler } from 'fastify';

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
 * installDpopNonces(app, deps);
 */
export function installDpopNonces(app: FastifyInstance, deps: Pick<AuthDeps, 'store' | 'clock'>): void {
  let current: { readonly value: string; readonly issuedAt: number } | null = null;
  let pending: Promise<string> | null = null;
  const nonce = async (): Promise<string> => {
    const now = deps.clock.now();
    if (current !== null && now - current.issuedAt < DPOP_NONCE_ROTATE_SECONDS * 1000 && now >= current.issuedAt) return current.value;
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
  // Read before the gateway's identity step removes the header. Both hooks take Fastify's
  // callback: an async hook costs every request a promise and a turn of the microtask queue, and
  // nearly every request carries no proof (docs/performance.md, 2026-11-29 at 07:00).
  const asked = new WeakSet<object>();
  app.addHook('onRequest', (req, _reply, done) => {
    if (req.headers.dpop !== undefined) asked.add(req.raw);
    done();
  });
  app.addHook('onSend', ((req, reply, payload, done) => {
    if (!asked.has(req.raw)) {
      done(null, payload);
      return;
    }
    // Returned, not handed to `done`: Fastify's hook runner then sends whatever the rest of the
    // answer throws (a header value Node refuses) to the error path, as it did for the async hook,
    // where a throw inside a promise callback would go unhandled and take the process down.
    return nonce().then(
      (value) => {
        reply.header('dpop-nonce', value);
        return payload;
      },
      // The store is failing: the answer goes without a nonce (the request's own outcome says why).
      () => payload,
    );
  }) as onSendHookHandler);
}
