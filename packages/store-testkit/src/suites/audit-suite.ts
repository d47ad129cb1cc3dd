import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type AuthDeps,
  auditDraft,
  auditEventToJson,
  completePairing,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  GENESIS_HASH,
  issueBootstrapToken,
  pairingProofString,
  preparePairing,
  removeDevice,
  revokeSession,
  rotateRefreshToken,
  verifyAuditChain,
} from '@svc/core';
import { allEvents, authenticate, enrollDevice, newDeviceKey, rejectsWithCode, seconds, signIn } from '../fixtures.js';
import type { SuiteContext } from '../harness.js';
import { TEST_NODE_ID } from './pairing-suite.js';

/**
 * Drives every audited operation through core's use cases and returns every secret that
 * passed through the flow (tokens and the pairing code), which no event may contain.
 */
async function fullFlow(deps: AuthDeps, advance: (ms: number) => void): Promise<{ secrets: string[]; expected: string[] }> {
  const secrets: string[] = [];
  const expected: string[] = [];
  const admin = newDeviceKey();
  const bootstrap = await issueBootstrapToken(deps, { recovery: false });
  secrets.push(bootstrap.token);
  expected.push('bootstrap.issued');
  await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: admin.publicKey });
  expected.push('device.enrolled');
  const first = await signIn(deps, admin, 'management');
  secrets.push(first.access_token, first.refresh_token);
  expected.push('session.created');
  const chl = await createChallenge(deps, { publicKey: admin.publicKey, realm: 'management' });
  await rejectsWithCode(
    createSession(deps, { challengeId: chl.id, signature: newDeviceKey().sign(chl.challenge), realm: 'management' }),
    'invalid_signature',
  );
  expected.push('signin.failed');
  const second = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
  secrets.push(second.access_token, second.refresh_token);
  expected.push('session.rotated');
  const third = await rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' });
  secrets.push(third.access_token, third.refresh_token);
  expected.push('session.rotated_in_grace');
  advance(seconds(deps.settings.refreshReuseGraceSeconds) + 1);
  await rejectsWithCode(rotateRefreshToken(deps, { refreshToken: first.refresh_token, realm: 'management' }), 'refresh_token_reused');
  expected.push('session.refresh_reused');
  const adminPair = await signIn(deps, admin, 'management');
  secrets.push(adminPair.access_token, adminPair.refresh_token);
  expected.push('session.created');
  const principal = await authenticate(deps, adminPair.access_token, 'management');
  const appKey = newDeviceKey();
  const intent = await preparePairing(deps, { principal, realm: 'application', publicKey: appKey.publicKey, ttlSeconds: 300 });
  secrets.push(intent.code, intent.code.replace('-', ''));
  expected.push('pairing.prepared');
  const proof = appKey.sign(pairingProofString({ nodeId: TEST_NODE_ID, intentId: intent.intent_id, publicKey: appKey.publicKey }));
  const attempt = (code: string) =>
    completePairing(deps, { nodeId: TEST_NODE_ID, intentId: intent.intent_id, code, publicKey: appKey.publicKey, signature: proof }).then(
      (r) => r.device,
    );
  await rejectsWithCode(attempt('0000-0000'), 'invalid_pairing_code');
  expected.push('pairing.failed');
  const appDevice = await attempt(intent.code);
  expected.push('pairing.completed');
  const appPair = await signIn(deps, appKey, 'application');
  secrets.push(appPair.access_token, appPair.refresh_token);
  expected.push('session.created');
  await revokeSession(deps, { principal, sessionId: appPair.session_id });
  expected.push('session.revoked');
  const other = await enrollDevice(deps, 'management');
  expected.push('device.enrolled');
  await removeDevice(deps, { principal, deviceId: other.device.id });
  expected.push('device.removed');
  await removeDevice(deps, { principal, deviceId: appDevice.id });
  expected.push('device.removed');
  await revokeSession(deps, { principal });
  expected.push('session.revoked');
  return { secrets, expected };
}

/** appendAuditEvent, listAuditEvents, auditHead, and the chain every other operation extends. */
export function auditSuite(ctx: SuiteContext): void {
  describe('audit chain', () => {
    test('every audited operation appends its event type, in order, to one chain that verifies', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { expected } = await fullFlow(deps, (ms) => clock.advance(ms));
        const events = await allEvents(store);
        assert.deepEqual(
          events.map((e) => e.type),
          expected,
        );
        const verdict = verifyAuditChain(events);
        assert.deepEqual(verdict, { ok: true, length: expected.length, head: events.at(-1)?.hash });
        assert.deepEqual(await store.auditHead(), { seq: expected.length, hash: events.at(-1)?.hash });
      }));

    test('no token, bootstrap token or pairing code ever appears in an audit event', () =>
      ctx.world(async ({ deps, store, clock }) => {
        const { secrets } = await fullFlow(deps, (ms) => clock.advance(ms));
        const events = await allEvents(store);
        assert.ok(events.length > 10);
        const text = events.map((e) => `${JSON.stringify(auditEventToJson(e))}\n${JSON.stringify(e)}`).join('\n');
        for (const secret of secrets) {
          assert.equal(text.includes(secret), false, 'a secret leaked into the audit trail');
          // The random body alone (without its scanner prefix) must not appear either.
          const body = secret.replace(/^svc[abr]_/, '');
          if (body !== secret) assert.equal(text.includes(body), false, 'a token body leaked into the audit trail');
        }
      }));

    test('an appended event reads back exactly as sealed, data and millisecond time included', () =>
      ctx.world(async ({ deps, store, clock }) => {
        clock.advance(123);
        const draft = auditDraft(deps, 'signin.failed', {
          realm: 'application',
          subject: 'sub_01KAQ00000000000000000000Z',
          deviceId: 'dev_01KAQ00000000000000000000Z',
          sessionId: 'ses_01KAQ00000000000000000000Z',
          data: { reason: 'bad_signature', attempts: 3, locked: false, note: null, 'ünï"códe': 'ok ✓', zero: 0 },
        });
        const sealed = await store.appendAuditEvent(draft);
        assert.equal(sealed.seq, 1);
        assert.equal(sealed.prevHash, GENESIS_HASH);
        assert.equal(sealed.at, clock.now());
        const [read] = await store.listAuditEvents({ afterSeq: 0, limit: 10 });
        assert.deepEqual(read, sealed);
        assert.deepEqual(read?.data, draft.data);
        assert.equal(verifyAuditChain([sealed]).ok, true);
        const second = await store.appendAuditEvent(auditDraft(deps, 'signin.failed', { data: {} }));
        assert.equal(second.seq, 2);
        assert.equal(second.prevHash, sealed.hash);
        assert.deepEqual(second.data, {});
      }));

    test('auditHead is null for an empty chain and then names the last event', () =>
      ctx.world(async ({ deps, store }) => {
        assert.equal(await store.auditHead(), null);
        assert.deepEqual(await store.listAuditEvents({ afterSeq: 0, limit: 10 }), []);
        const e1 = await store.appendAuditEvent(auditDraft(deps, 'signin.failed', {}));
        assert.deepEqual(await store.auditHead(), { seq: 1, hash: e1.hash });
        const e2 = await store.appendAuditEvent(auditDraft(deps, 'signin.failed', {}));
        assert.deepEqual(await store.auditHead(), { seq: 2, hash: e2.hash });
      }));

    test('listAuditEvents pages with afterSeq and limit', () =>
      ctx.world(async ({ deps, store }) => {
        for (let i = 0; i < 7; i++) await store.appendAuditEvent(auditDraft(deps, 'signin.failed', { data: { i } }));
        const all = await store.listAuditEvents({ afterSeq: 0, limit: 100 });
        assert.deepEqual(
          all.map((e) => e.seq),
          [1, 2, 3, 4, 5, 6, 7],
        );
        const pages: number[][] = [];
        let after = 0;
        for (;;) {
          const page = await store.listAuditEvents({ afterSeq: after, limit: 3 });
          if (page.length === 0) break;
          pages.push(page.map((e) => e.seq));
          after = page.at(-1)?.seq ?? after;
        }
        assert.deepEqual(pages, [[1, 2, 3], [4, 5, 6], [7]]);
        assert.deepEqual(
          (await store.listAuditEvents({ afterSeq: 5, limit: 100 })).map((e) => e.data.i),
          [5, 6],
        );
        assert.deepEqual(await store.listAuditEvents({ afterSeq: 0, limit: 0 }), []);
        assert.deepEqual(await store.listAuditEvents({ afterSeq: 7, limit: 10 }), []);
      }));

    test('events appended through two connections form one chain', { skip: ctx.hasPeers ? false : 'no peer connection' }, () =>
      ctx.world(async ({ deps, store, peer }) => {
        const other = await peer();
        assert.ok(other !== null);
        const writes: Promise<unknown>[] = [];
        for (let i = 0; i < 20; i++)
          writes.push((i % 2 ? other : store).appendAuditEvent(auditDraft(deps, 'signin.failed', { data: { i } })));
        await Promise.all(writes);
        const events = await allEvents(other);
        assert.equal(events.length, 20);
        assert.equal(verifyAuditChain(events).ok, true);
      }),
    );
  });
}
