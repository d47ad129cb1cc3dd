import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { test } from 'node:test';
import {
  type AuditEvent,
  type AuditEventDraft,
  checkAuditCheckpoint,
  publicKeyHexOf,
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
