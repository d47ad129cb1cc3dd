import { ERROR_CODES, PROBLEM_SCHEMA_ID, problemSchema } from '@svc/core';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { PROBLEM_CONTENT_TYPE } from './problem.js';

/**
 * Adds the schemas shared by the routes of a surface (the problem+json body). Call it on the
 * root instance before registering routes that refer to them.
 *
 * @example
 * installSharedSchemas(app);
 */
export function installSharedSchemas(app: FastifyInstance): void {
  app.addSchema(problemSchema);
}

/** A problem+json response of one status, as a Fastify/OpenAPI response entry. */
export interface ProblemResponse {
  readonly description: string;
  readonly content: { readonly [PROBLEM_CONTENT_TYPE]: { readonly schema: { readonly $ref: string } } };
}

/** The statuses of a refused body: over 64 KiB, not JSON. */
export const BODY_PROBLEMS = [413, 415] as const;

/** The refusals every route of every surface can answer: a malformed request, a bug. */
export const COMMON_PROBLEMS = [400, 500] as const;

/**
 * The problem+json responses for `statuses` (plus {@link COMMON_PROBLEMS}), each described by
 * the error codes of that status, for a route's `schema.response`. Errors are sent pre-serialized,
 * so these schemas document the body without filtering it.
 *
 * @throws {TypeError} for a status no error code has (a programming mistake).
 * @example
 * schema: { response: { 200: okBody, ...problemResponses(401, 429) } }
 */
export function problemResponses(...statuses: readonly number[]): Record<string, ProblemResponse> {
  const out: Record<string, ProblemResponse> = {};
  for (const status of [...new Set([...COMMON_PROBLEMS, ...statuses])].sort((a, b) => a - b)) {
    const codes = Object.entries(ERROR_CODES).filter(([, e]) => e.status === status);
    const first = codes[0];
    if (first === undefined) throw new TypeError(`no error code has the status ${status}`);
    out[String(status)] = {
      description: `${first[1].title}: ${codes.map(([code]) => `\`${code}\``).join(', ')}`,
      content: { [PROBLEM_CONTENT_TYPE]: { schema: { $ref: `${PROBLEM_SCHEMA_ID}#` } } },
    };
  }
  return out;
}

/** A route schema with the OpenAPI annotations the document shows. */
export interface DocumentedSchema extends FastifySchema {
  /** One line: what the route does. */
  readonly summary: string;
  /** Who may call it: the security requirement (absent: no token). */
  readonly security?: ReadonlyArray<Readonly<Record<string, readonly string[]>>>;
}

/**
 * A route's schema with its OpenAPI annotations, typed (Fastify ignores `summary` and
 * `security`; @fastify/swagger puts them in the document).
 *
 * @example
 * app.get('/health', { schema: documented({ summary: 'Whether the store answers', response }) }, handler);
 */
export function documented<S extends DocumentedSchema>(schema: S): S {
  return schema;
}
