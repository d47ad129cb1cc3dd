import { randomBytes } from 'node:crypto';
import { type AuthDeps, type Clock, type Logger, type RandomBytes, silentLogger } from '@svc/core';
import { type AuthSettings, DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';

/** The project id every suite deps carry (a valid `prj_` ULID). */
export const TEST_PROJECT_ID = 'prj_01KAQ0000000TESTK1TPR0JECT';

/** What {@link makeDeps} lets a test change. */
export interface DepsOverrides {
  readonly random?: RandomBytes;
  readonly log?: Logger;
  readonly projectId?: string;
  /** Merged over {@link DEFAULT_AUTH_SETTINGS} with bearer sessions (see {@link makeDeps}). */
  readonly settings?: Partial<AuthSettings>;
}

/**
 * Deps for driving core's use cases against `store`: CSPRNG bytes from `node:crypto`, a
 * silent logger, the default settings but bearer sessions (with `overrides.settings` merged
 * in) and a fixed project id.
 *
 * @example
 * const deps = makeDeps(store, createFakeClock(), { settings: { refreshReuseGraceSeconds: 0 } });
 * const challenge = await createChallenge(deps, { publicKey, realm: 'management' });
 */
export function makeDeps(store: Store, clock: Clock, overrides: DepsOverrides = {}): AuthDeps {
  return {
    store,
    clock,
    random: overrides.random ?? ((n: number) => randomBytes(n)),
    log: overrides.log ?? silentLogger,
    projectId: overrides.projectId ?? TEST_PROJECT_ID,
    // Bearer sessions (`:auth/sender-constraint :off`) unless a test asks otherwise: the suites
    // drive the store's rotation with bare refresh tokens; the DPoP suite asks for `:refresh`.
    settings: Object.freeze({
      ...DEFAULT_AUTH_SETTINGS,
      senderConstraint: Object.freeze({ management: 'off', application: 'off' } as const),
      ...(overrides.settings ?? {}),
    }),
  };
}
