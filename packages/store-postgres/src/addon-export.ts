import { ConfigError, type EdnMap, readModuleConfig, type SecretRef } from '@svc/core/config';
import { STORE_CONTRACT_VERSION, type Store, type StoreAddonContext, type StoreAddonExport } from '@svc/core/store';
import { POSTGRES_STORE_CONFIG } from './config-fields.js';
import { splitConnectionString } from './hosts.js';
import { openPostgresStore, type PostgresStoreOptions } from './open-postgres-store.js';
import { POSTGRES_STORE_OPERATIONS } from './operations.js';

/**
 * The `:svc/store` export of this addon. Module `:config` keys: `:store/url`
 * (`postgres://user@host:port/db`, never with a password in it) or the discrete `:store/host`,
 * `:store/port`, `:store/database`, `:store/user`; `:store/password` as a secret reference
 * (`#svc/secret "env:PGPASSWORD"` or `#svc/secret "file:/run/secrets/pg"`); `:store/schema`
 * (default `svc_auth`), `:store/pool-size` (default 10), `:store/ssl`, `:store/allow-unauthenticated`
 * (accept a server that does not authenticate the role; development only, warned on every open).
 *
 * @example
 * const store = await svcStore.open(config.store.config, ctx);
 */
export const svcStore: StoreAddonExport = {
  contractVersion: STORE_CONTRACT_VERSION,
  operations: POSTGRES_STORE_OPERATIONS,
  async open(config: EdnMap, ctx: StoreAddonContext): Promise<Store> {
    const where = { file: ctx.configFile, key: ctx.configKey };
    const v = readModuleConfig(config, POSTGRES_STORE_CONFIG, where);
    const url = v[':store/url'] as string | undefined;
    if (url !== undefined) {
      let parsed: URL | undefined;
      try {
        // libpq's host list (`h1:5432,h2:5433`) and target_session_attrs are checked first; each host's URL is a plain one.
        parsed = new URL(splitConnectionString(url).urls[0] as string);
      } catch (err) {
        const detail = err instanceof TypeError && /^(target_session_attrs|a host|a port)/.test(err.message) ? err.message : undefined;
        if (detail !== undefined) throw new ConfigError([{ ...where, key: `${where.key} :store/url`, message: detail }]);
        parsed = undefined;
      }
      if (parsed === undefined) {
        try {
          parsed = new URL(url);
        } catch {
          parsed = undefined;
        }
      }
      if (parsed === undefined || !/^postgres(ql)?:$/.test(parsed.protocol)) {
        throw new ConfigError([
          {
            ...where,
            key: `${where.key} :store/url`,
            message: 'expected a postgres://user@host:port/database URL (several hosts: postgres://user@h1:5432,h2:5433/database)',
          },
        ]);
      }
      if (parsed.password !== '') {
        throw new ConfigError([
          {
            ...where,
            key: `${where.key} :store/url`,
            message: 'the URL holds a password: remove it and use :store/password #svc/secret "env:NAME"',
          },
        ]);
      }
    }
    const options: PostgresStoreOptions = {
      ...(url !== undefined ? { connectionString: url } : {}),
      ...(v[':store/host'] !== undefined ? { host: v[':store/host'] as string } : {}),
      ...(v[':store/port'] !== undefined ? { port: v[':store/port'] as number } : {}),
      ...(v[':store/database'] !== undefined ? { database: v[':store/database'] as string } : {}),
      ...(v[':store/user'] !== undefined ? { user: v[':store/user'] as string } : {}),
      ...(v[':store/password'] !== undefined ? { password: ctx.resolveSecret(v[':store/password'] as SecretRef) } : {}),
      ...(v[':store/schema'] !== undefined ? { schema: v[':store/schema'] as string } : {}),
      ...(v[':store/pool-size'] !== undefined ? { max: v[':store/pool-size'] as number } : {}),
      ...(v[':store/ssl'] !== undefined ? { ssl: v[':store/ssl'] as boolean } : {}),
      ...(v[':store/allow-unauthenticated'] !== undefined ? { allowUnauthenticated: v[':store/allow-unauthenticated'] as boolean } : {}),
      ...(ctx.warn !== undefined ? { warn: (event: string, message: string) => ctx.warn?.(event, message) } : {}),
    };
    return openPostgresStore(options);
  },
};
