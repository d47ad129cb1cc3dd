import { AuthError, ERROR_CODES, type ProblemJson } from '@svc/core';
import type { FastifyReply } from 'fastify';

/** The media type of every error body (RFC 9457). */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/**
 * The `application/problem+json` body for an {@link AuthError}. A 5xx never carries the
 * error's own detail: that goes to the log only.
 *
 * @example
 * problemJson(new AuthError('invalid_token', 'the access token is expired or revoked'));
 * // { type: 'about:blank', title: 'Unauthorized', status: 401, code: 'invalid_token', detail: '...' }
 */
export function problemJson(err: AuthError): ProblemJson {
  const entry = ERROR_CODES[err.code];
  return {
    type: 'about:blank',
    title: entry.title,
    status: entry.status,
    code: err.code,
    detail: err.expose ? err.detail : entry.meaning,
  };
}

/**
 * Sends `err` as problem+json with its status and extra headers (e.g. `Retry-After`).
 * Returns the reply so a handler or hook can `return sendProblem(...)`.
 *
 * @example
 * return sendProblem(reply, new AuthError('forbidden_host', 'the Host header is not a loopback name'));
 */
export function sendProblem(reply: FastifyReply, err: AuthError): FastifyReply {
  const body = problemJson(err);
  reply.code(body.status).type(PROBLEM_CONTENT_TYPE);
  for (const name in err.headers) {
    const value = err.headers[name];
    if (value !== undefined) reply.header(name, value);
  }
  return reply.send(JSON.stringify(body));
}

/**
 * The generic refusal for anything unexpected: no internals reach the caller; `cause` keeps
 * the original for the log.
 *
 * @example
 * throw internalError(err);
 */
export function internalError(cause: unknown): AuthError {
  return new AuthError('internal_error', ERROR_CODES.internal_error.meaning, { cause });
}
