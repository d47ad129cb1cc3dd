import type { AuthDeps } from '@svc/core';
import type { AuthSettings } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import { createFakeClock, type FakeClock } from './fake-clock.js';
import { makeDeps } from './make-deps.js';

/** How the suite gets stores: whatever backs them is the factory's business. */
export interface StoreFactory {
  /** A fresh, empty store. */
  open(): Promise<Store>;
  /** A second, independent connection to the SAME data (another "node"), if the store supports it. */
  openPeer?(store: Store): Promise<Store>;
  /** Releases a store or peer; default `store.close()`. */
  close?(store: Store): Promise<void>;
  /**
   * What a copy of the store's database holds for the refresh grace answer: session id → the
   * sealed pair kept for its previous refresh token (sessions without one are absent). Read
   * beside the Store API, as an attacker with a database dump would.
   */
  storedGracePairs(store: Store): Promise<ReadonlyMap<string, string>>;
}

/** One test's world: a fresh store, a fake clock, and deps over them. */
export interface World {
  readonly store: Store;
  readonly clock: FakeClock;
  readonly deps: AuthDeps;
  /** Another connection to the same data (closed with the world), or null when the factory has none. */
  peer(): Promise<Store | null>;
  /** Deps over `store` sharing this world's clock and settings. */
  depsFor(store: Store): AuthDeps;
  /** The sealed grace pairs a dump of this world's database holds ({@link StoreFactory.storedGracePairs}). */
  storedGracePairs(): Promise<ReadonlyMap<string, string>>;
}

/** What every suite section receives. */
export interface SuiteContext {
  readonly factory: StoreFactory;
  /** Whether the factory can open peers; tests that need one are skipped otherwise. */
  readonly hasPeers: boolean;
  /** Runs `fn` in a fresh world and closes everything it opened, whatever happens. */
  world(fn: (w: World) => Promise<void>, settings?: Partial<AuthSettings>): Promise<void>;
}

/**
 * Builds the suite context for a factory: each `world` gets a fresh store and fake clock.
 *
 * @example
 * const ctx = suiteContext(factory);
 * test('ping answers', () => ctx.world(async ({ store }) => store.ping()));
 */
export function suiteContext(factory: StoreFactory): SuiteContext {
  const close = (store: Store): Promise<void> => (factory.close ? factory.close(store) : store.close());
  return {
    factory,
    hasPeers: factory.openPeer !== undefined,
    async world(fn, settings) {
      const store = await factory.open();
      const peers: Store[] = [];
      const clock = createFakeClock();
      const depsFor = (s: Store): AuthDeps => makeDeps(s, clock, settings === undefined ? {} : { settings });
      try {
        await fn({
          store,
          clock,
          deps: depsFor(store),
          depsFor,
          storedGracePairs: () => factory.storedGracePairs(store),
          async peer() {
            if (factory.openPeer === undefined) return null;
            const peer = await factory.openPeer(store);
            peers.push(peer);
            return peer;
          },
        });
      } finally {
        for (const peer of peers) await close(peer);
        await close(store);
      }
    },
  };
}
