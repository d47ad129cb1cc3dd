import { isAbsolute, join } from 'node:path';
import {
  type EdnMap,
  readModuleConfig,
  STORE_CONTRACT_VERSION,
  type Store,
  type StoreAddonContext,
  type StoreAddonExport,
} from '@svc/core';
import { openSqliteStore } from './open-sqlite-store.js';
import { SQLITE_STORE_OPERATIONS } from './operations.js';

const FIELDS = {
  ':store/file': { kind: 'string' },
  ':store/synchronous': { kind: 'string', oneOf: ['normal', 'full'] },
} as const;

/**
 * The `:svc/store` export of this addon. Module `:config` keys: `:store/file` (default
 * `control.db`, relative to the control directory) and `:store/synchronous` (`"full"`, the
 * default: every acknowledged commit is on disk, surviving power loss; or `"normal"`: survives
 * a crash of the process, the last commits may roll back on power loss).
 *
 * @example
 * const store = await svcStore.open(config.store.config, { controlDir, configFile, configKey, resolveSecret });
 */
export const svcStore: StoreAddonExport = {
  contractVersion: STORE_CONTRACT_VERSION,
  operations: SQLITE_STORE_OPERATIONS,
  async open(config: EdnMap, ctx: StoreAddonContext): Promise<Store> {
    const v = readModuleConfig(config, FIELDS, { file: ctx.configFile, key: ctx.configKey });
    const file = typeof v[':store/file'] === 'string' ? v[':store/file'] : 'control.db';
    return openSqliteStore({
      file: isAbsolute(file) ? file : join(ctx.controlDir, file),
      synchronous: v[':store/synchronous'] === 'normal' ? 'normal' : 'full',
      requireOwnerOnly: true,
    });
  },
};
