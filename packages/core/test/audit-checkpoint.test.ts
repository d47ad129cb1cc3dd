import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { test } from 'node:test';
import {
  type AuditEvent,
  type AuditEventDraft,
  checkAuditCheckpoint,
  nodeIdOf,
  publicKeyHexOf,
  reviewAuditCheckpoints,
  type SignedAuditCheckpoint,
  sealAuditEvent,
  signAuditCheckpoint,
} from '@svc/core';

function signer() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { publicKeyHex: publicKeyHexOf(publicKey), sign: (m: Uint8Array) => sign(null, m, privateKey) };
}

function chainOf(n: number, tag = ''): AuditEvent[] {
  const events: AuditEvent[] = [];
  for (let i = 0; i < n; i++) {
    const draft: AuditEventDraft = {
      id: `evt_${tag}${i}`,
      at: 1_700_000_000_000 + i,
      type: 'session.created',
      realm: 'management',
      subject: 'sub_x',
      deviceId: null,
      sessionId: null,
      data: {},
    };
    const prev = events.at(-1);
    events.push(sealAuditEvent(draft, prev?.seq ?? 0, prev?.hash ?? '0'.repeat(64)));
  }
  return events;
}

const key = signer();
const events = chainOf(5);
const head = events[4] as AuditEvent;
const cp: SignedAuditCheckpoint = signAuditCheckpoint(
  { project: 'prj_a', head: { seq: head.seq, hash: head.hash }, now: 1_700_000_100_000 },
  key,
);
const chain = { project: 'prj_a', events, publicKeyHex: key.publicKeyHex };

test('a checkpoint of the head holds against the same chain and any longer continuation of it', () => {
  assert.deepEqual(checkAuditCheckpoint(cp, chain), { ok: true });
  const longer = [...events, ...chainOf(1, 'x').map((e) => sealAuditEvent(e, head.seq, head.hash))];
  assert.deepEqual(checkAuditCheckpoint(cp, { ...chain, events: longer }), { ok: true });
  const empty = signAuditCheckpoint({ project: 'prj_a', head: null, now: 0 }, key);
  assert.deepEqual(checkAuditCheckpoint(empty, { ...chain, events: [] }), { ok: true });
});

test('a dropped tail is truncated; a re-sealed chain of the same length is rewritten', () => {
  assert.equal(checkAuditCheckpoint(cp, { ...chain, events: events.slice(0, 3) }).ok, false);
  assert.deepEqual((checkAuditCheckpoint(cp, { ...chain, events: events.slice(0, 3) }) as { problem: string }).problem, 'truncated');
  const resealed = chainOf(5, 'forged');
  assert.equal((checkAuditCheckpoint(cp, { ...chain, events: resealed }) as { problem: string }).problem, 'rewritten');
});

test('a forged, edited, foreign or malformed checkpoint proves nothing', () => {
  const problem = (value: unknown, c = chain) => (checkAuditCheckpoint(value, c) as { problem?: string }).problem;
  assert.equal(problem(signAuditCheckpoint({ project: 'prj_a', head: { seq: 5, hash: head.hash }, now: 0 }, signer())), 'other_key');
  assert.equal(problem({ ...cp, payload: { ...cp.payload, length: 4, head: (events[3] as AuditEvent).hash } }), 'bad_signature');
  assert.equal(problem(cp, { ...chain, project: 'prj_b' }), 'other_project');
  for (const bad of [null, 'x', {}, { ...cp, payload: { ...cp.payload, type: 'svc-edge-diagnostics' } }, { ...cp, signature: 'zz' }]) {
    assert.equal(problem(bad), 'malformed');
  }
});

test('a review of an export lists the latest checkpoints newest first, each with its signing node and verdict, and counts the whole file', () => {
  const early = signAuditCheckpoint(
    { project: 'prj_a', head: { seq: 2, hash: (events[1] as AuditEvent).hash }, now: 1_700_000_050_000 },
    key,
  );
  const stranger = signer();
  const foreign = signAuditCheckpoint({ project: 'prj_a', head: { seq: head.seq, hash: head.hash }, now: 1_700_000_200_000 }, stranger);
  const text = [JSON.stringify(early), '', 'not json', JSON.stringify(cp), JSON.stringify(foreign), ''].join('\n');
  const review = reviewAuditCheckpoints(text, chain, 3);
  assert.equal(review.total, 4, 'every non-empty line is a checkpoint to check');
  assert.equal(review.failed, 2, 'the stranger’s and the unreadable line');
  assert.deepEqual(
    review.checkpoints.map((k) => [k.line, k.ok, k.problem, k.length]),
    [
      [5, false, 'other_key', 5],
      [4, true, null, 5],
      [3, false, 'malformed', null],
    ],
  );
  const newest = review.checkpoints[0];
  assert.equal(newest?.node_id, nodeIdOf(stranger.publicKeyHex), 'the node of the key that signed it');
  assert.equal(review.checkpoints[1]?.head, head.hash);
  assert.equal(review.checkpoints[1]?.at, cp.payload.at);
  // Truncated after the export: the checkpoint of five events fails, the earlier one of two still holds.
  const cut = reviewAuditCheckpoints([JSON.stringify(early), JSON.stringify(cp)].join('\n'), { ...chain, events: events.slice(0, 3) }, 10);
  assert.deepEqual(
    cut.checkpoints.map((k) => [k.ok, k.problem]),
    [
      [false, 'truncated'],
      [true, null],
    ],
  );
  assert.equal(cut.failed, 1);
});
