import { after } from 'node:test';
import { storeConformance } from '@svc/store-testkit';
import type { PostgresStore } from '../../src/index.js';
import { createTestEnv } from '../pg-test-env.js';

const env = createTestEnv();
after(() => env.dispose());

// Each world gets a fresh schema (a fresh store); a peer is a second PostgresStore with its
// own pool on that schema, i.e. a second node. The schema is dropped when its store closes
// (the harness closes peers first).
const primaries = new Set<PostgresStore>();

storeConformance('postgres', {
  async open() {
    const store = await env.open(env.schema());
    primaries.add(store);
    return store;
  },
  openPeer: (store) => env.open((store as PostgresStore).schema),
  async close(store) {
    const pg = store as PostgresStore;
    await pg.close();
    if (primaries.delete(pg)) await env.drop(pg.schema);
  },
  // What a dump of the schema holds: read with the admin connection, beside the store.
  async storedGracePairs(store) {
    const { schema } = store as PostgresStore;
    const { rows } = await env.admin.query<{ id: string; prev_successor: string }>(
      `SELECT id, prev_successor FROM ${schema}.sessions WHERE prev_successor IS NOT NULL`,
    );
    return new Map(rows.map((r) => [r.id, r.prev_successor]));
  },
});
