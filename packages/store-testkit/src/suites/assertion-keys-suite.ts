import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  type AssertionKeyCustody,
  auditDraft,
  type FreshAssertionKey,
  parseKeyEncryptionKey,
  readClusterAssertionKeys,
  rotateClusterAssertionKeys,
} from '@svc/core';
import { allEvents, auditLength, eventTypes } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { RACERS } from './concurrency-suite.js';

function freshKey(): FreshAssertionKey {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  return { x: jwk.x as string, d: jwk.d as string };
}

const CUSTODY: AssertionKeyCustody = { keks: [parseKeyEncryptionKey(randomBytes(32).toString('base64'))], requireSealed: true };

/** getAssertionKeys, saveAssertionKeys: the cluster's assertion key set, a compare-and-set on its version. */
export function assertionKeysSuite(ctx: SuiteContext): void {
  describe('assertion key set (getAssertionKeys, saveAssertionKeys)', () => {
    test('a fresh store has none; the first save is version 1 with its event, and every peer reads it', () =>
      ctx.world(async (w) => {
        assert.equal(await w.store.getAssertionKeys(), null);
        const before = await auditLength(w.store);
        const event = auditDraft(w.deps, 'app.assertion_keys_created', { data: { source: 'generated' } });
        const saved = await w.store.saveAssertionKeys({ expectedVersion: 0, keySet: '{"version":1,"keys":[]}', now: w.clock.now() }, [
          event,
        ]);
        assert.deepEqual(saved, { saved: true, record: { version: 1, keySet: '{"version":1,"keys":[]}', updatedAt: w.clock.now() } });
        assert.deepEqual(await w.store.getAssertionKeys(), { version: 1, keySet: '{"version":1,"keys":[]}', updatedAt: w.clock.now() });
        assert.equal(await auditLength(w.store), before + 1);
        assert.equal((await allEvents(w.store)).at(-1)?.id, event.id);
        const peer = await w.peer();
        if (peer !== null) assert.equal((await peer.getAssertionKeys())?.version, 1);
      }));

    test('a save from a version that is no longer stored writes nothing and answers what is stored', () =>
      ctx.world(async (w) => {
        const e = () => [auditDraft(w.deps, 'app.assertion_key_rotated', { data: {} })];
        await w.store.saveAssertionKeys({ expectedVersion: 0, keySet: 'A', now: w.clock.now() }, e());
        w.clock.advance(1000);
        const second = await w.store.saveAssertionKeys({ expectedVersion: 1, keySet: 'B', now: w.clock.now() }, e());
        assert.deepEqual(second, { saved: true, record: { version: 2, keySet: 'B', updatedAt: w.clock.now() } });
        const length = await auditLength(w.store);
        for (const stale of [0, 1, 3]) {
          const r = await w.store.saveAssertionKeys({ expectedVersion: stale, keySet: `stale ${stale}`, now: w.clock.now() }, e());
          assert.deepEqual(r, { saved: false, current: { version: 2, keySet: 'B', updatedAt: w.clock.now() } }, `from version ${stale}`);
        }
        assert.equal(await auditLength(w.store), length, 'a refused save appends no event');
      }));

    test(`${RACERS} nodes creating the first set at once: exactly one set is stored, with one event`, () =>
      ctx.world(async (w) => {
        const peer = await w.peer();
        const stores = peer === null ? [w.store] : [w.store, peer];
        const results = await Promise.all(
          Array.from({ length: RACERS }, (_, i) =>
            (stores[i % stores.length] ?? w.store).saveAssertionKeys({ expectedVersion: 0, keySet: `set ${i}`, now: w.clock.now() }, [
              auditDraft(w.deps, 'app.assertion_keys_created', { data: { racer: i } }),
            ]),
          ),
        );
        const winners = results.filter((r) => r.saved);
        assert.equal(winners.length, 1);
        const stored = await w.store.getAssertionKeys();
        assert.equal(stored?.version, 1);
        assert.equal(winners[0]?.saved === true ? winners[0].record.keySet : null, stored?.keySet);
        for (const r of results) if (!r.saved) assert.equal(r.current?.keySet, stored?.keySet, 'a loser is told the winner');
        assert.equal((await eventTypes(w.store)).filter((t) => t === 'app.assertion_keys_created').length, 1);
      }));

    test(`${RACERS} nodes rotating at once through core's rules: one rotation wins, the rest conflict or find it under way`, () =>
      ctx.world(async (w) => {
        const first = await rotateClusterAssertionKeys(w.deps, CUSTODY, { fresh: freshKey(), immediate: false });
        assert.equal(first.outcome, 'rotated');
        w.clock.advance(1000);
        const peer = await w.peer();
        const deps = [w.deps, ...(peer === null ? [] : [w.depsFor(peer)])];
        const results = await Promise.all(
          Array.from({ length: RACERS }, (_, i) =>
            rotateClusterAssertionKeys(deps[i % deps.length] ?? w.deps, CUSTODY, { fresh: freshKey(), immediate: false }),
          ),
        );
        const won = results.filter((r) => r.outcome === 'rotated');
        assert.equal(won.length, 1, 'exactly one rotation is saved');
        // A racer that read before the winner saved conflicts; one that read after finds its key pending.
        assert.equal(results.filter((r) => r.outcome === 'conflict' || r.outcome === 'pending').length, RACERS - 1);
        const stored = await readClusterAssertionKeys(w.deps, CUSTODY);
        assert.equal(stored?.version, 2);
        const winner = won[0];
        assert.ok(winner?.outcome === 'rotated');
        assert.deepEqual(
          stored?.set.keys.map((k) => k.kid),
          [first.outcome === 'rotated' ? first.next.kid : '', winner.next.kid],
          "the stored set is the winner's: the first key and the winner's next key",
        );
        assert.equal((await eventTypes(w.store)).filter((t) => t === 'app.assertion_key_rotated').length, 2);
        // The next rotation, made while the winner's key waits to sign, changes nothing: already under way.
        const again = await rotateClusterAssertionKeys(w.deps, CUSTODY, { fresh: freshKey(), immediate: false });
        assert.equal(again.outcome, 'pending');
      }));

    test('the stored text holds no private key in the clear when sealed (what a copy of the database holds)', () =>
      ctx.world(async (w) => {
        const fresh = freshKey();
        const r = await rotateClusterAssertionKeys(w.deps, CUSTODY, { fresh, immediate: false });
        assert.equal(r.outcome, 'rotated');
        const stored = await w.store.getAssertionKeys();
        assert.ok(stored !== null);
        assert.ok(stored.keySet.includes(fresh.x), 'the public half is stored as it is');
        assert.ok(!stored.keySet.includes(fresh.d), 'the private half is not stored in the clear');
        assert.ok(!stored.keySet.includes(Buffer.from(fresh.d, 'base64url').toString('hex')));
        assert.ok(!stored.keySet.includes(Buffer.from(fresh.d, 'base64url').toString('base64')));
      }));
  });
}
