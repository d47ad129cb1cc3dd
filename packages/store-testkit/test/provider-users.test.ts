import { createMemoryStore, providerUsersSuite, suiteContext } from '@svc/store-testkit';

// The provider side of users (#27) against the reference store. Stores whose users are in
// place run the same suite from their conformance run (`storeConformance`).
providerUsersSuite(suiteContext({ open: async () => createMemoryStore(), storedGracePairs: async () => new Map() }));
