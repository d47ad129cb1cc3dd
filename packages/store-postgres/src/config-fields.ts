import type { ConfigField } from '@svc/core';

/**
 * The `:config` keys of this addon's `:svc/store` module: what the addon reads when it opens,
 * and what the CLI checks at load (every profile) for the bundled build. A file of its own so
 * checking a project does not load the PostgreSQL driver.
 */
export const POSTGRES_STORE_CONFIG = {
  ':store/url': { kind: 'string' },
  ':store/host': { kind: 'string' },
  ':store/port': { kind: 'integer', min: 1, max: 65_535 },
  ':store/database': { kind: 'string' },
  ':store/user': { kind: 'string' },
  ':store/password': { kind: 'secret' },
  ':store/schema': { kind: 'string' },
  ':store/pool-size': { kind: 'integer', min: 1, max: 200 },
  ':store/ssl': { kind: 'boolean' },
} as const satisfies Readonly<Record<string, ConfigField>>;
