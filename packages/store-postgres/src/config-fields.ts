import type { ConfigField } from '@svc/core/config';

/**
 * The `:config` keys of this addon's `:svc/store` module: what the addon reads when it opens,
 * and what the CLI checks at load (every profile) for the bundled build. A file of its own so
 * checking a project does not load the PostgreSQL driver.
 */
export const POSTGRES_STORE_CONFIG = {
  ':store/url': {
    kind: 'string',
    meaning:
      '`postgres://user@host:port/database`, never with a password in it; as in libpq, several hosts (`postgres://user@h1:5432,h2:5433/database?target_session_attrs=read-write`) are tried in order, and `target_session_attrs=read-write` (or `primary`) keeps only a server that takes writes, so the nodes follow a promoted standby',
  },
  ':store/host': { kind: 'string', meaning: 'the server host, instead of `:store/url`' },
  ':store/port': { kind: 'integer', min: 1, max: 65_535, meaning: 'the server port, instead of `:store/url`' },
  ':store/database': { kind: 'string', meaning: 'the database, instead of `:store/url`' },
  ':store/user': { kind: 'string', meaning: 'the user, instead of `:store/url`' },
  ':store/password': { kind: 'secret', meaning: 'a secret reference: `#svc/secret "env:NAME"` or `#svc/secret "file:/path"`' },
  ':store/schema': {
    kind: 'string',
    meaning: 'the schema holding the tables (default `svc_auth`; created when missing; refused when another non-superuser role owns it)',
  },
  ':store/pool-size': {
    kind: 'integer',
    min: 1,
    max: 200,
    meaning: 'connections per process (default 10), and a quarter as many more (at least 1) for the attempt budget',
  },
  ':store/ssl': { kind: 'boolean', meaning: '`true` to connect with TLS' },
  ':store/allow-unauthenticated': {
    kind: 'boolean',
    meaning:
      '`true` accepts a server that lets the role connect without a password (trust authentication), with a warning on every start; development only: otherwise refused at open, since any process on the host could write the control state',
  },
} as const satisfies Readonly<Record<string, ConfigField>>;
