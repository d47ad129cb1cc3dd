import type { EdnMap } from './edn-model.js';
import type { SecretRef } from './module-config.js';
import type { Store } from './store.js';

/** What a store addon's `:svc/store` export receives besides its module `:config`. */
export interface StoreAddonContext {
  /** The control directory (0700): where an embedded store keeps its files. */
  readonly controlDir: string;
  /** `project.edn`'s path, for messages that name the file. */
  readonly configFile: string;
  /** The module key path, for messages, e.g. `:svc/modules :store :config`. */
  readonly configKey: string;
  /** Resolves a deployment-time secret reference to its value (never logged). */
  resolveSecret(ref: SecretRef): string;
  /**
   * Reports a setting that weakens the store's protection and that the operator accepted
   * explicitly (e.g. a PostgreSQL server that does not authenticate the store's role): the
   * caller logs it loudly on every open. `event` is a stable name, `message` one line.
   */
  warn?(event: string, message: string): void;
}

/**
 * The `:svc/store` export of a store addon: opens the control store from the module's
 * `:config`. Configuration problems are thrown as `ConfigError` naming file and key.
 */
export interface StoreAddonExport {
  /** The store contract version it implements (ABI). */
  readonly contractVersion: number;
  /** The operation set it implements. */
  readonly operations: readonly string[];
  open(config: EdnMap, ctx: StoreAddonContext): Promise<Store>;
}

/** The manifest file every addon archive carries at its package root. */
export const ADDON_MANIFEST_FILE = 'svc-addon.json';
