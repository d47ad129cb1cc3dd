import { after } from 'node:test';
import { storeConformance } from '@svc/store-testkit';
import { openSqliteStore, SqliteStore } from 'svc-store-sqlite';
import { ownerOnlyTempDir } from './temp-dir.js';

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
});
