import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { test } from 'node:test';
import { type AccountingEvent, type BackupState, checkBackupSignature, publicKeyHexOf, signBackup, unaccountedState } from '@svc/core';

function signer() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return { publicKeyHex: publicKeyHexOf(publicKey), sign: (m: Uint8Array) => sign(null, m, privateKey) };
}

const SHA = 'ab'.repeat(32);
const AT = Date.parse('2026-11-20T12:00:00Z');

test('a backup signed by the current node key verifies; by a retired node key only when the operator names it; by an unknown key never', () => {
  const old = signer();
  const current = signer();
  const previousKeys = [{ node_id: 'x', public_key: old.publicKeyHex, valid_from: null, valid_until: '2026-11-21T00:00:00.000Z' }];
  const trust = { sha256: SHA, project: 'prj_a', nodeKey: current.publicKeyHex, previousKeys, operatorKeys: [] };
  assert.equal(checkBackupSignature(signBackup({ project: 'prj_a', sha256: SHA, schemaVersion: 9, now: AT }, current), trust).ok, true);
  const byOld = signBackup({ project: 'prj_a', sha256: SHA, schemaVersion: 9, now: AT }, old);
  const refused = checkBackupSignature(byOld, trust);
  assert.equal(refused.ok ? 'ok' : refused.problem, 'retired_key', 'a retired key is not trusted on its own, even inside its window');
  assert.ok(!refused.ok && refused.detail.includes(`--trusted-key ${old.publicKeyHex}`), 'the refusal says how to accept it');
  assert.equal(checkBackupSignature(byOld, { ...trust, operatorKeys: [old.publicKeyHex] }).ok, true);
  const stranger = checkBackupSignature(signBackup({ project: 'prj_a', sha256: SHA, schemaVersion: 9, now: AT }, signer()), trust);
  assert.equal(stranger.ok === false && stranger.problem, 'untrusted');
});

test('backup-backdated-by-leaked-retired-key: a retired node key signing another file with `at` inside its window is refused', () => {
  const leaked = signer();
  const current = signer();
  const previousKeys = [
    { node_id: 'x', public_key: leaked.publicKeyHex, valid_from: '2026-11-01T00:00:00.000Z', valid_until: '2026-11-21T00:00:00.000Z' },
  ];
  const forgedSha = 'ef'.repeat(32);
  // Made after the key was retired, but dated inside its window: the signer chooses `at`.
  const forged = signBackup({ project: 'prj_a', sha256: forgedSha, schemaVersion: 9, now: Date.parse('2026-11-10T00:00:00Z') }, leaked);
  const verdict = checkBackupSignature(forged, {
    sha256: forgedSha,
    project: 'prj_a',
    nodeKey: current.publicKeyHex,
    previousKeys,
    operatorKeys: [],
  });
  assert.equal(verdict.ok ? 'ok' : verdict.problem, 'retired_key');
  const noNodeKey = checkBackupSignature(forged, { sha256: forgedSha, project: 'prj_a', nodeKey: null, previousKeys, operatorKeys: [] });
  assert.equal(noNodeKey.ok ? 'ok' : noNodeKey.problem, 'retired_key', 'without a node key file, the history vouches for nothing either');
});

test('a backup signed by a key the operator names verifies without any node key (disaster recovery)', () => {
  const lost = signer();
  const signed = signBackup({ project: 'prj_a', sha256: SHA, schemaVersion: 9, now: AT }, lost);
  const none = { sha256: SHA, project: 'prj_a', nodeKey: null, previousKeys: [], operatorKeys: [] };
  const refused = checkBackupSignature(signed, none);
  assert.equal(refused.ok ? 'ok' : refused.problem, 'untrusted');
  assert.equal(checkBackupSignature(signed, { ...none, operatorKeys: [lost.publicKeyHex] }).ok, true);
});

test('a backup signature made for other bytes, for another project, edited, or malformed is refused', () => {
  const node = signer();
  const trust = { sha256: SHA, project: 'prj_a', nodeKey: node.publicKeyHex, previousKeys: [], operatorKeys: [] };
  const signed = signBackup({ project: 'prj_a', sha256: SHA, schemaVersion: 9, now: AT }, node);
  const problem = (v: ReturnType<typeof checkBackupSignature>) => (v.ok ? 'ok' : v.problem);
  assert.equal(problem(checkBackupSignature(signed, { ...trust, sha256: 'cd'.repeat(32) })), 'other_file');
  assert.equal(problem(checkBackupSignature(signed, { ...trust, project: 'prj_b' })), 'other_project');
  assert.equal(
    problem(checkBackupSignature({ ...signed, payload: { ...signed.payload, sha256: 'cd'.repeat(32) } }, trust)),
    'bad_signature',
  );
  assert.equal(problem(checkBackupSignature({ ...signed, signature: undefined }, trust)), 'malformed');
  assert.equal(problem(checkBackupSignature(null, trust)), 'malformed');
});

const event = (e: Partial<AccountingEvent> & Pick<AccountingEvent, 'type'>): AccountingEvent => ({
  realm: 'management',
  subject: 'admin',
  deviceId: null,
  sessionId: null,
  data: {},
  ...e,
});

const TRAIL: AccountingEvent[] = [
  event({ type: 'device.enrolled', deviceId: 'dev_1', data: { public_key: 'aa'.repeat(32) } }),
  event({ type: 'pairing.completed', deviceId: 'dev_2', data: { public_key: 'bb'.repeat(32) } }),
  event({
    type: 'link.created',
    realm: 'application',
    subject: 'u1',
    deviceId: 'link_1',
    data: { issuer: 'https://idp', external_subject: 'x1' },
  }),
  event({ type: 'session.created', deviceId: 'dev_1', sessionId: 'ses_1' }),
  event({
    type: 'session.created',
    realm: 'application',
    subject: 'u1',
    deviceId: 'link_1',
    sessionId: 'ses_2',
    data: { link_id: 'link_1' },
  }),
  event({ type: 'session.revoked', deviceId: 'dev_1', sessionId: 'ses_1' }),
  event({ type: 'device.removed', deviceId: 'dev_2' }),
];

const STATE: BackupState = {
  devices: [
    { id: 'dev_1', publicKey: 'aa'.repeat(32), realm: 'management', subject: 'admin', removedAt: null },
    { id: 'dev_2', publicKey: 'bb'.repeat(32), realm: 'management', subject: 'admin', removedAt: 5 },
  ],
  links: [{ id: 'link_1', realm: 'application', subject: 'u1', issuer: 'https://idp', externalSubject: 'x1', removedAt: null }],
  sessions: [
    { id: 'ses_1', realm: 'management', subject: 'admin', deviceId: 'dev_1', revokedAt: 7 },
    { id: 'ses_2', realm: 'application', subject: 'u1', deviceId: 'link_1', revokedAt: null },
  ],
};

test('state the audit trail accounts for (devices enrolled or paired, links, device and provider sessions) has no problem', () => {
  assert.deepEqual(unaccountedState(STATE, TRAIL), []);
});

test('a device, link or session the audit trail never recorded, or one changed or brought back after removal, is named', () => {
  const cases: [string, BackupState, RegExp][] = [
    [
      'swapped key',
      { ...STATE, devices: [{ ...(STATE.devices[0] as BackupState['devices'][0]), publicKey: 'ee'.repeat(32) }] },
      /^device dev_1 /,
    ],
    [
      'moved subject',
      { ...STATE, devices: [{ ...(STATE.devices[0] as BackupState['devices'][0]), subject: 'mallory' }] },
      /^device dev_1 /,
    ],
    [
      'inserted device',
      {
        ...STATE,
        devices: [...STATE.devices, { id: 'dev_9', publicKey: 'ff'.repeat(32), realm: 'management', subject: 'm', removedAt: null }],
      },
      /^device dev_9 /,
    ],
    [
      'removed device back',
      {
        ...STATE,
        devices: [STATE.devices[0] as BackupState['devices'][0], { ...(STATE.devices[1] as BackupState['devices'][0]), removedAt: null }],
      },
      /^device dev_2 was removed/,
    ],
    [
      'relinked identity',
      { ...STATE, links: [{ ...(STATE.links[0] as BackupState['links'][0]), externalSubject: 'other' }] },
      /^link link_1 /,
    ],
    [
      'inserted session',
      {
        ...STATE,
        sessions: [...STATE.sessions, { id: 'ses_9', realm: 'management', subject: 'admin', deviceId: 'dev_1', revokedAt: null }],
      },
      /^session ses_9 /,
    ],
    [
      'session moved to another device',
      { ...STATE, sessions: [{ ...(STATE.sessions[1] as BackupState['sessions'][0]), deviceId: 'dev_1' }] },
      /^session ses_2 /,
    ],
    [
      'revoked session live',
      { ...STATE, sessions: [{ ...(STATE.sessions[0] as BackupState['sessions'][0]), revokedAt: null }] },
      /^session ses_1 was revoked/,
    ],
  ];
  for (const [name, state, pattern] of cases) {
    const problems = unaccountedState(state, TRAIL);
    assert.equal(problems.length, 1, `${name}: ${problems.join('; ')}`);
    assert.match(problems[0] as string, pattern, name);
  }
});

test('a live bootstrap token or open pairing intent the audit trail never issued is named (each would enrol a device later)', () => {
  const expiresAt = Date.parse('2026-11-20T12:15:00Z');
  const trail = [
    ...TRAIL,
    event({ type: 'bootstrap.issued', data: { bootstrap_id: 'bt_1', reason: 'init', expires_at: new Date(expiresAt).toISOString() } }),
    event({ type: 'pairing.prepared', realm: 'application', subject: 'u1', data: { intent_id: 'int_1' } }),
  ];
  const token = { id: 'bt_1', expiresAt, usedAt: null, supersededAt: null };
  const intent = { id: 'int_1', realm: 'application', subject: 'u1', completedAt: null, burnedAt: null };
  const state: BackupState = { ...STATE, bootstrapTokens: [token], pairingIntents: [intent] };
  assert.deepEqual(unaccountedState(state, trail), [], 'the issued token and the prepared intent are accounted for');
  const cases: [string, BackupState, RegExp][] = [
    ['planted token', { ...state, bootstrapTokens: [token, { ...token, id: 'bt_9' }] }, /^bootstrap token bt_9 /],
    ['token made to last', { ...state, bootstrapTokens: [{ ...token, expiresAt: expiresAt + 86_400_000 }] }, /^bootstrap token bt_1 /],
    ['planted intent', { ...state, pairingIntents: [intent, { ...intent, id: 'int_9' }] }, /^pairing intent int_9 /],
    ['intent for another subject', { ...state, pairingIntents: [{ ...intent, subject: 'mallory' }] }, /^pairing intent int_1 /],
  ];
  for (const [name, s, pattern] of cases) {
    const problems = unaccountedState(s, trail);
    assert.equal(problems.length, 1, `${name}: ${problems.join('; ')}`);
    assert.match(problems[0] as string, pattern, name);
  }
  // Used, superseded, completed or burned ones enrol nothing more.
  const spent: BackupState = {
    ...STATE,
    bootstrapTokens: [
      { ...token, id: 'bt_8', usedAt: 1 },
      { ...token, id: 'bt_7', supersededAt: 1 },
    ],
    pairingIntents: [
      { ...intent, id: 'int_8', completedAt: 1 },
      { ...intent, id: 'int_7', burnedAt: 1 },
    ],
  };
  assert.deepEqual(unaccountedState(spent, trail), []);
});
