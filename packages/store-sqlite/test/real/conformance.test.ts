import { after } from 'node:test';
import { storeConformance } from '@svc/store-testkit';
import Database from 'better-sqlite3';
import { openSqliteStore, SqliteStore } from 'svc-store-sqlite';
import { ownerOnlyTempDir } from '../temp-dir.js';

const temp = await ownerOnlyTempDir();
after(() => temp.remove());
let n = 0;

storeConformance('sqlite', {
  open: () => openSqliteStore({ file: `${temp.dir}/control-${++n}.db` }),
  // Another connection to the same file: what a second process (the CLI next to the server) sees.
  openPeer: (store) => {
    if (!(store instanceof SqliteStore)) throw new TypeError('expected a SqliteStore');
    return openSqliteStore({ file: store.file });
  },
  // What a copy of the file holds: read with a connection of its own, beside the store.
  async storedGracePairs(store) {
    if (!(store instanceof SqliteStore)) throw new TypeError('expected a SqliteStore');
    const db = new Database(store.file, { readonly: true, fileMustExist: true });
    try {
      const rows = db.prepare('SELECT id, prev_successor FROM sessions WHERE prev_successor IS NOT NULL').all() as {
        id: string;
        prev_successor: string;
      }[];
      return new Map(rows.map((r) => [r.id, r.prev_successor]));
    } finally {
      db.close();
    }
  },
});
