import type { FastifyInstance } from 'fastify';

/**
 * Adds the first `onRequest` hook of a surface: a request written on a connection behind another
 * runs only once the answer before it has gone and left the connection open. RFC 9112 §9.6: a
 * server that answers `Connection: close` "MUST NOT process any further requests received on that
 * connection". Node's parser reads every request a client writes at once (pipelining) and hands
 * each to the app straight away, queueing only the answers; so a request written behind one that
 * is answered with `close` (a refused framing or path, a body that does not parse or is too large,
 * a store fault) used to run all the same: its effect happened (a logout, a module's write) and
 * its answer never left, so the caller could not know it ran and might send it again.
 *
 * Node gives an answer its connection (`res.socket`, then the `'socket'` event) when the answer
 * before it is done and did not close the connection; after one that closed it, never. A request
 * whose answer has no connection yet waits for it; one that arrives on a connection that is
 * already closing is never run. Requests pipelined behind answers that keep the connection open
 * still run, in order, one after the other. Costs a request nothing more than two reads when it
 * was not pipelined.
 *
 * @example
 * installPipelineGuard(app); // before any other onRequest hook
 */
export function installPipelineGuard(app: FastifyInstance): void {
  app.addHook('onRequest', (req, reply, done) => {
    const res = reply.raw;
    if (res.socket === null) {
      // Written behind a request still being answered: on only when that answer left the
      // connection open (Node then hands this answer the connection). Deferred to the next tick:
      // Node emits 'socket' from inside the answer before's finish.
      res.once('socket', () => process.nextTick(done));
      return;
    }
    // Parsed after an answer that closes the connection had gone out (the connection is ending):
    // never run, and nothing is written; the connection closes.
    if (req.raw.socket.writableEnded) return;
    done();
  });
}
