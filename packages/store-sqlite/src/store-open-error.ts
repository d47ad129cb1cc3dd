/**
 * Why a control database was not opened: its file or directory is accessible by group or
 * other, it is not a svc auth control store, or its schema is newer than this package knows.
 * The message names the path and says what to do.
 */
export class StoreOpenError extends Error {
  /** The path the refusal is about. */
  readonly path: string;

  constructor(path: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StoreOpenError';
    this.path = path;
  }
}
