import type { ConfigField } from '@svc/core/config';

/**
 * The `:config` keys of this addon's `:svc/store` module: what the addon reads when it opens,
 * and what the CLI checks at load (every profile) for the bundled build. A file of its own so
 * checking a project does not load the SQLite driver.
 */
export const SQLITE_STORE_CONFIG = {
  ':store/file': { kind: 'string', meaning: 'the database file, relative to the control directory (default `control.db`)' },
  ':store/synchronous': {
    kind: 'string',
    oneOf: ['normal', 'full'],
    meaning:
      '`"normal"` (default: WAL; enrollments, revocations, device removals, detected reuse, bootstrap and pairing commits fsynced, sign-ins and rotations may roll back on power loss) or `"full"` (every commit fsynced)',
  },
  ':store/bearer-cache-sessions': {
    kind: 'integer',
    min: 0,
    max: 10_000_000,
    meaning:
      'how many checked sessions the server keeps in memory for bearer checks (default `10000`, about 1 KiB each; `0` reads the store on every check). Never stale: see the security model',
  },
} as const satisfies Readonly<Record<string, ConfigField>>;
