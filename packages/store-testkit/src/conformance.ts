import { describe } from 'node:test';
import { type StoreFactory, suiteContext } from './harness.js';
import { assertionKeysSuite } from './suites/assertion-keys-suite.js';
import { auditSuite } from './suites/audit-suite.js';
import { bootstrapSuite } from './suites/bootstrap-suite.js';
import { concurrencySuite } from './suites/concurrency-suite.js';
import { controlStateSuite } from './suites/control-state-suite.js';
import { devicesSuite } from './suites/devices-suite.js';
import { dpopSuite } from './suites/dpop-suite.js';
import { handoffSuite } from './suites/handoff-suite.js';
import { linksSuite } from './suites/links-suite.js';
import { pairingSuite } from './suites/pairing-suite.js';
import { projectSuite } from './suites/project-suite.js';
import { providerSuite } from './suites/provider-suite.js';
import { providerUsersSuite } from './suites/provider-users-suite.js';
import { revocationSuite } from './suites/revocation-suite.js';
import { sessionsSuite } from './suites/sessions-suite.js';
import { signInSuite } from './suites/sign-in-suite.js';
import { statsSuite } from './suites/stats-suite.js';
import { usersSuite } from './suites/users-suite.js';

/**
 * Registers the store conformance suite with `node:test`: every store operation, at the store
 * level and through core's use cases, with a fake clock driving every expiry, and 50-way races
 * for every single-use credential (spread over peer connections when the factory opens them).
 * Each test gets a fresh store from `factory.open()` and closes it afterwards.
 *
 * @example
 * // packages/store-x/test/conformance.test.ts
 * storeConformance('x', {
 *   open: () => openXStore(freshDatabase()),
 *   openPeer: (store) => openXStore((store as XStore).location),
 * });
 */
export function storeConformance(name: string, factory: StoreFactory): void {
  const ctx = suiteContext(factory);
  describe(`store conformance: ${name}`, () => {
    projectSuite(ctx);
    bootstrapSuite(ctx);
    devicesSuite(ctx);
    signInSuite(ctx);
    sessionsSuite(ctx);
    revocationSuite(ctx);
    pairingSuite(ctx);
    auditSuite(ctx);
    statsSuite(ctx);
    concurrencySuite(ctx);
    linksSuite(ctx);
    providerSuite(ctx);
    dpopSuite(ctx);
    usersSuite(ctx);
    providerUsersSuite(ctx);
    controlStateSuite(ctx);
    assertionKeysSuite(ctx);
    handoffSuite(ctx);
  });
}
