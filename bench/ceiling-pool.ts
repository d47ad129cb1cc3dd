// The PostgreSQL pool of the bench's ceiling servers (pg-read-server.ts, login-floor-server.ts
// postgres): the address from the environment, never the arguments (it may hold a password), the
// tables of one schema, BIGINT (the epoch milliseconds of the schema's times) as numbers as the
// store reads them, and a pool of the store's default size of 10. Its statements always on their
// generic plans: these servers run nothing else, where the store gets there with one statement
// per list length (see its turn-batch.ts).
import pg from 'pg';

/**
 * The pool of a ceiling server on `schema`, at the address in `process.env[urlVariable]`; exits
 * with `usage` (status 2) when either is missing or the schema is not a lowercase identifier.
 *
 * @example
 * const pool = ceilingPool('PG_READ_URL', process.argv[2], 'usage: PG_READ_URL=<postgres url> pg-read-server.ts <schema>');
 */
export function ceilingPool(urlVariable: string, schema: string | undefined, usage: string): pg.Pool {
  const url = process.env[urlVariable];
  if (url === undefined || schema === undefined || !/^[a-z_][a-z0-9_]*$/.test(schema)) {
    process.stderr.write(`${usage}\n`);
    process.exit(2);
  }
  const types = new pg.TypeOverrides();
  types.setTypeParser(20, 'text', Number);
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    options: `-c search_path=${schema} -c plan_cache_mode=force_generic_plan`,
    types,
  });
  // An idle connection the server ends is the pool's to replace, not the end of this process.
  pool.on('error', () => undefined);
  return pool;
}
