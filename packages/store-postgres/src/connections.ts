// Who is connected to a store's schema: the name every connection of a store carries, and the
// server processes of this process's own connections (see `exportPostgresState`'s refusal).

/**
 * The `application_name` of this store's connections to `schema` (cut to the 63 bytes the server keeps).
 *
 * @example
 * svcApplicationName('svc_auth'); // 'svc-auth svc_auth'
 */
export function svcApplicationName(schema: string): string {
  return `svc-auth ${schema}`.slice(0, 63);
}

/** The server processes of every connection this process's stores opened: never "another node". */
export const OWN_BACKENDS: Set<number> = new Set();
