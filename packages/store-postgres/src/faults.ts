import type { StoreFault } from '@svc/core/store';

/** Node socket errors that mean the server cannot be reached or the connection broke. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * The store fault a `pg` error means, or null when it is not an outage (a constraint violation,
 * a bug). SQLSTATE classes 08 (connection exception), 57P01-57P03 (shutdown, restart, starting
 * up), 53300 (too many connections) and 25006 (a write on a read-only server: a standby, the
 * primary having moved) are `connection`; 57014 (statement timeout), 55P03 (lock
 * timeout), 25P03 (idle-in-transaction timeout) and 40001/40P01 (serialisation failure,
 * deadlock: retryable contention) are `timeout` or `locked`; 53100 is `disk_full`; 53200 and
 * class 58 are `io_error`. The driver's own errors for a lost or slow connection carry no code
 * and are recognised by their fixed messages.
 */
export function postgresFault(err: unknown): StoreFault | null {
  if (typeof err !== 'object' || err === null) return null;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (SOCKET_CODES.has(code)) return 'connection';
    if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300') return 'connection';
    // read_only_sql_transaction: the server is (now) a standby, the primary is elsewhere.
    if (code === '25006') return 'connection';
    if (code === '57014' || code === '25P03') return 'timeout';
    if (code === '55P03' || code === '40001' || code === '40P01') return 'locked';
    if (code === '53100') return 'disk_full';
    if (code === '53200' || code.startsWith('58')) return 'io_error';
  }
  const message = (err as { message?: unknown }).message;
  if (typeof message !== 'string') return null;
  if (message === 'Query read timeout' || message.startsWith('timeout exceeded when trying to connect')) return 'timeout';
  if (
    message.startsWith('Connection terminated') ||
    message === 'Client has encountered a connection error and is not queryable' ||
    message === 'Client was closed and is not queryable' ||
    message.startsWith('connect ECONNREFUSED')
  ) {
    return 'connection';
  }
  // Node reports a refused connect to several addresses as an AggregateError.
  const errors = (err as { errors?: unknown }).errors;
  if (Array.isArray(errors) && errors.length > 0 && errors.every((e) => postgresFault(e) === 'connection')) return 'connection';
  return null;
}
