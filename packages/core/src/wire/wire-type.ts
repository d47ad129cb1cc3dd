// A type-only import: it compiles away, so core keeps zero runtime dependencies (see the
// architecture test); json-schema-to-ts is a devDependency of core, needed by tsc only.
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

/**
 * Read-only all the way down, and closed: an index signature of `unknown` (what FromSchema
 * gives an object schema that does not say `additionalProperties: false`) is dropped, since
 * the server serializes responses with their schemas and fast-json-stringify drops every
 * field a schema does not name. A typed index signature (`additionalProperties: {...}`) stays.
 */
type Closed<T> = T extends readonly (infer U)[]
  ? readonly Closed<U>[]
  : T extends object
    ? { readonly [K in keyof T as string extends K ? (unknown extends T[K] ? never : K) : K]: Closed<T[K]> }
    : T;

/**
 * The TypeScript type of the JSON a wire schema describes: one declaration (the schema, which
 * the server validates and serializes with and the OpenAPI document shows) and a type derived
 * from it, so the server and the client SDK cannot disagree about a field.
 *
 * @example
 * const healthResponse = { type: 'object', required: ['status'], properties: { status: { type: 'string' } } } as const;
 * type HealthJson = WireType<typeof healthResponse>; // { readonly status: string }
 */
export type WireType<S extends JSONSchema> = Closed<FromSchema<S>>;
