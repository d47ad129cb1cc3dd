import { isAbsolute, join } from 'node:path';
import { type EdnMap, readModuleConfig } from '@svc/core/config';
import { STORE_CONTRACT_VERSION, type Store, type StoreAddonContext, type StoreAddonExport } from '@svc/core/store';
import { SQLITE_STORE_CONFIG } from './config-fields.js';
import { openSqliteStore } from './open-sqlite-store.js';
import { SQLITE_STORE_OPERATIONS } from './operations.js';

/**
 * The `:svc/store` export of this addon. Module `:config` keys: `:store/file` (default
 * `control.db`, relative to the control directory) and `:store/synchronous`: `"normal"` (the
 * default: WAL with every security-critical commit (enrollment, revocation, device removal,
 * reuse detection, bootstrap and pairing) fsynced before it is acknowledged, while sign-ins
 * and rotations survive a crash of the process but may roll back on power loss, which only
 * ever un-issues tokens) or `"full"` (every commit fsynced); `:store/bearer-cache-sessions`: how
 * many checked sessions the bearer-check cache keeps (default 10,000; 0 turns it off).
 *
 * @example
 * const store = await svcStore.open(config.store.config, { controlDir, configFile, configKey, resolveSecret });
 */
export const svcStore: StoreAddonExport = {
  contractVersion: STORE_CONTRACT_VERSION,
  operations: SQLITE_STORE_OPERATIONS,
  async open(config: EdnMap, ctx: StoreAddonContext): Promise<Store> {
    const v = readModuleConfig(config, SQLITE_STORE_CONFIG, { file: ctx.configFile, key: ctx.configKey });
    const file = typeof v[':store/file'] === 'string' ? v[':store/file'] : 'control.db';
    return openSqliteStore({
      file: isAbsolute(file) ? file : join(ctx.controlDir, file),
      synchronous: v[':store/synchronous'] === 'full' ? 'full' : 'normal',
      ...(typeof v[':store/bearer-cache-sessions'] === 'number' ? { bearerCacheSessions: v[':store/bearer-cache-sessions'] } : {}),
      requireOwnerOnly: true,
    });
  },
};
