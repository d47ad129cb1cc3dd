// A process of its own (SQLite reads SQLITE_TMPDIR once, when it starts): watches the
// directory SQLite would put temporary files in, opens a store in its own owner-only
// directory, signs devices in many at a time (one write batch of many savepoints), and prints
// what appeared in the watched directory meanwhile, as one JSON line.
import { watch } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createChallenge, createSession, enrollWithBootstrapToken, issueBootstrapToken } from '@svc/core';
import { createFakeClock, makeDeps, newDeviceKey } from '@svc/store-testkit';
import { openSqliteStore } from 'svc-store-sqlite';

const watched = process.env.SQLITE_TMPDIR as string;
const [storeDir = '', countText = '64'] = process.argv.slice(2);
const count = Number(countText);
const seen: string[] = [];
const watcher = watch(watched, (event, name) => seen.push(`${event} ${String(name)}`));
const store = await openSqliteStore({ file: join(storeDir, 'control.db') });
const deps = makeDeps(store, createFakeClock());
const keys = Array.from({ length: 8 }, () => newDeviceKey());
for (const [i, key] of keys.entries()) {
  const { token } = await issueBootstrapToken(deps, { recovery: i > 0 });
  await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: key.publicKey });
}
// All challenges in one batch, then all sign-ins: each write of a batch runs in its own savepoint.
const challenges = await Promise.all(
  Array.from({ length: count }, (_, i) => {
    const key = keys[i % keys.length] as (typeof keys)[number];
    return createChallenge(deps, { publicKey: key.publicKey, realm: 'management' }).then((c) => ({ c, key }));
  }),
);
const pairs = await Promise.all(
  challenges.map(({ c, key }) => createSession(deps, { challengeId: c.id, signature: key.sign(c.challenge), realm: 'management' })),
);
await store.close();
// inotify delivers on the event loop: give it a moment to hand over what it saw.
await sleep(200);
watcher.close();
process.stdout.write(`${JSON.stringify({ signedIn: pairs.length, seen })}\n`);
