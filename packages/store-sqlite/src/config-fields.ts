import type { ConfigField } from '@svc/core';

/**
 * The `:config` keys of this addon's `:svc/store` module: what the addon reads when it opens,
 * and what the CLI checks at load (every profile) for the bundled build. A file of its own so
 * checking a project does not load the SQLite driver.
 */
export const SQLITE_STORE_CONFIG = {
  ':store/file': { kind: 'string' },
  ':store/synchronous': { kind: 'string', oneOf: ['normal', 'full'] },
  ':store/bearer-cache-sessions': { kind: 'integer', min: 0, max: 10_000_000 },
} as const satisfies Readonly<Record<string, ConfigField>>;
