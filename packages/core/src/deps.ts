import type { Clock, Logger, RandomBytes } from './ports.js';
import type { AuthSettings } from './settings.js';
import type { Store } from './store.js';

/**
 * What every use case receives: the store, the clock, randomness, a logger, the project id
 * (bound into every challenge) and the timing settings. Passed explicitly, never global.
 */
export interface AuthDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly random: RandomBytes;
  readonly log: Logger;
  readonly projectId: string;
  readonly settings: AuthSettings;
}
