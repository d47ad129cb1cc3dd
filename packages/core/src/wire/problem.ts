import { ERROR_CODES, type ErrorCode } from '../errors.js';
import type { WireType } from './wire-type.js';

/** The `$id` of the shared problem+json schema (a component of the OpenAPI document). */
export const PROBLEM_SCHEMA_ID = 'Problem';

/**
 * The error body of every svc surface: RFC 9457 fields plus the stable `code`, whose values
 * are exactly the error table's. Errors are sent pre-serialized, so this documents the body
 * without filtering it.
 */
export const problemSchema = {
  $id: PROBLEM_SCHEMA_ID,
  type: 'object',
  description: 'RFC 9457 problem details plus the stable `code` of the error table (docs/errors.md).',
  required: ['type', 'title', 'status', 'code', 'detail'],
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: ['about:blank'] },
    title: { type: 'string' },
    status: { type: 'integer' },
    code: { type: 'string', enum: Object.keys(ERROR_CODES) as ErrorCode[] },
    detail: { type: 'string' },
  },
} as const;
/** The error body of the contract: RFC 9457 fields plus the stable `code`. */
export type ProblemJson = WireType<typeof problemSchema>;
