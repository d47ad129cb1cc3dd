import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/**
 * The answer to an earlier request on `socket` that is still being prepared or written, or null.
 * Anything written onto the socket meanwhile (a raw refusal) would go out ahead of it, or into it,
 * and a request Node hands over meanwhile (an upgrade, handed over at once) would run beside it.
 * Node's HTTP server marks the connection's current answer on the socket (`_httpMessage`), clears
 * it when that answer is done, and then marks the next one, if any.
 */
function pendingAnswer(socket: Duplex): ServerResponse | null {
  return (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? null;
}

/**
 * Whether an answer to an earlier request on `socket` is still to come.
 *
 * @example
 * if (answerPending(socket)) socket.destroy();
 */
export function answerPending(socket: Duplex): boolean {
  return pendingAnswer(socket) !== null;
}

/**
 * Whether an answer to an earlier request on `socket` is already being written (its head has gone
 * out): anything written onto the socket now would land inside its body.
 *
 * @example
 * if (answerUnderWay(socket)) socket.destroy();
 */
export function answerUnderWay(socket: Duplex): boolean {
  return pendingAnswer(socket)?.headersSent === true;
}

/**
 * Runs `then` once every answer to the requests before on `socket` has gone: at once when none is
 * pending. It runs after the answers that keep the connection open and after one that closes it
 * (then `socket` is no longer writable), and never when an answer is cut (the socket is gone).
 *
 * @example
 * afterPendingAnswers(socket, () => writeRawProblem(socket, err));
 */
export function afterPendingAnswers(socket: Duplex, then: () => void): void {
  const pending = pendingAnswer(socket);
  if (pending === null) then();
  // Node's own 'finish' listener, added first, has handed the connection on (or ended it) by then.
  else pending.once('finish', () => afterPendingAnswers(socket, then));
}

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
