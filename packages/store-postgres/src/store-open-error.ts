/**
 * Why the PostgreSQL control store was not opened: the server is unreachable, refused the
 * credentials, the database is missing, a migration failed, or the schema is newer than this
 * package knows. The message is one line that names the server (never the password) and says
 * what to do; the CLI prints it as is.
 */
export class StoreOpenError extends Error {
  /** The server, database and schema the refusal is about, as `host:port/database (schema s)`. */
  readonly target: string;
  /** The driver's or server's error code (`ECONNREFUSED`, SQLSTATE `28P01`, ...) when there is one. */
  readonly code: string | undefined;

  constructor(target: string, message: string, code?: string) {
    // No `cause` on purpose: a driver error may carry connection details we do not control.
    super(message);
    this.name = 'StoreOpenError';
    this.target = target;
    this.code = code;
  }
}
