// A process of its own (SQLite reads SQLITE_TMPDIR once, when it starts): watches the
// directory SQLite would put temporary files in, opens a store in its own owner-only
// directory, and prints what appeared in the watched directory meanwhile, as one JSON line.
//
// The write that could spill: a device's removal revoking its many sessions, one batch with a
// write that throws (a challenge stored twice). That batch then runs again with each write in
// its own savepoint (the store's write queue), and the removal's savepoint journals every
// session page it changes.
import { watch } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { auditDraft, createChallenge, createSession, enrollWithBootstrapToken, issueBootstrapToken } from '@svc/core';
import { createFakeClock, makeDeps, newDeviceKey } from '@svc/store-testkit';
import { openSqliteStore } from 'svc-store-sqlite';

const watched = process.env.SQLITE_TMPDIR as string;
const [storeDir = '', countText = '300'] = process.argv.slice(2);
const count = Number(countText);
const seen: string[] = [];
const watcher = watch(watched, (event, name) => seen.push(`${event} ${String(name)}`));
const store = await openSqliteStore({ file: join(storeDir, 'control.db') });
const deps = makeDeps(store, createFakeClock());
const key = newDeviceKey();
const { token } = await issueBootstrapToken(deps, { recovery: false });
const device = await enrollWithBootstrapToken(deps, { bootstrapToken: token, publicKey: key.publicKey });
// A second admin, so the first one's removal is not refused as the last way in.
const second = await issueBootstrapToken(deps, { recovery: true });
await enrollWithBootstrapToken(deps, { bootstrapToken: second.token, publicKey: newDeviceKey().publicKey });
const challenges = await Promise.all(
  Array.from({ length: count }, () => createChallenge(deps, { publicKey: key.publicKey, realm: 'management' })),
);
const pairs = await Promise.all(
  challenges.map((c) => createSession(deps, { challengeId: c.id, signature: key.sign(c.challenge), realm: 'management' })),
);
const kept = await createChallenge(deps, { publicKey: key.publicKey, realm: 'management' });
// Issued in one turn of the event loop: one batch.
const [twice, removal] = await Promise.allSettled([
  store.createChallenge(kept),
  store.removeDevice(
    { deviceId: device.id, now: deps.clock.now() },
    auditDraft(deps, 'device.removed', { realm: 'management', subject: device.subject, deviceId: device.id, data: { id: device.id } }),
  ),
]);
await store.close();
// inotify delivers on the event loop: give it a moment to hand over what it saw.
await sleep(200);
watcher.close();
process.stdout.write(
  `${JSON.stringify({
    signedIn: pairs.length,
    twice: twice.status,
    revoked: removal.status === 'fulfilled' ? removal.value.revokedSessions : String(removal.reason),
    seen,
  })}\n`,
);
