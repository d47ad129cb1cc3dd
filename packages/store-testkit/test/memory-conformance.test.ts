import { createMemoryStore, MemoryStore, storeConformance } from '@svc/store-testkit';

// The reference store: core's rules applied over plain maps. The SQL stores pass the same suite.
storeConformance('memory', {
  open: async () => createMemoryStore(),
  // Another handle on the same data: a second node sharing the store.
  openPeer: async (store) => {
    if (!(store instanceof MemoryStore)) throw new TypeError('expected a MemoryStore');
    return store.openPeer();
  },
  storedGracePairs: async (store) => {
    if (!(store instanceof MemoryStore)) throw new TypeError('expected a MemoryStore');
    return store.storedGracePairs();
  },
});
