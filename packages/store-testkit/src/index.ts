export { storeConformance } from './conformance.js';
export { createFakeClock, FAKE_CLOCK_START, type FakeClock } from './fake-clock.js';
export { type DeviceKey, dpopProof, newDeviceKey, type TestDpopProof } from './fixtures.js';
export { type StoreFactory, suiteContext } from './harness.js';
export { type DepsOverrides, makeDeps, TEST_PROJECT_ID } from './make-deps.js';
export { createMemoryStore, MemoryStore } from './memory-store.js';
export { collectState, type PopulatedState, populateControlState, rowsOf } from './suites/control-state-suite.js';
export { providerUsersSuite } from './suites/provider-users-suite.js';
export { createTestProvider, type TestProof, type TestProvider } from './test-provider.js';
