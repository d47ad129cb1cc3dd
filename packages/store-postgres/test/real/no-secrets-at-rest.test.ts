import assert from 'node:assert/strict';
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { after, test } from 'node:test';
import {
  type AuthDeps,
  authenticate,
  completePairing,
  createChallenge,
  createSession,
  digestToken,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  normalizePairingCode,
  pairingProofString,
  preparePairing,
  publicKeyHexOf,
  revokeSession,
  rotateRefreshToken,
  silentLogger,
  verifyAuditChain,
} from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import type { Store } from '@svc/core/store';
import { createTestEnv } from '../pg-test-env.js';

const env = createTestEnv();
after(() => env.dispose());

function deviceKey() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKey: publicKeyHexOf(publicKey),
    sign: (message: string) => sign(null, Buffer.from(message, 'utf8'), privateKey).toString('hex'),
  };
}

function depsOver(store: Store, clock: { now(): number }): AuthDeps {
  return {
    store,
    clock,
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000N0SECRETS00000',
    // Bearer sessions: this flow presents refresh tokens bare (the DPoP replay cache holds only digests too).
    settings: { ...DEFAULT_AUTH_SETTINGS, senderConstraint: { management: 'off', application: 'off' } },
  };
}

/** Every row of every table of `schema`, each as PostgreSQL's text form of the whole row. */
async function dumpSchema(schema: string): Promise<Map<string, string[]>> {
  const tables = await env.admin.query<{ table_name: string }>(
    "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_type = 'BASE TABLE' ORDER BY table_name",
    [schema],
  );
  const dump = new Map<string, string[]>();
  for (const { table_name } of tables.rows) {
    const result = await env.admin.query<{ row: string }>(`SELECT t::text AS row FROM ${schema}.${table_name} t`);
    dump.set(
      table_name,
      result.rows.map((r) => r.row),
    );
  }
  return dump;
}

test('no token or pairing code is stored anywhere, only digests, after a full flow on two nodes', async () => {
  const schema = env.schema();
  const a = await env.open(schema);
  const b = await env.open(schema);
  try {
    let now = Date.UTC(2026, 10, 22, 10, 0, 0, 0);
    const clock = { now: () => now };
    const onA = depsOver(a, clock);
    const onB = depsOver(b, clock);
    const secrets: string[] = [];

    const admin = deviceKey();
    const bootstrap = await issueBootstrapToken(onA, { recovery: false });
    secrets.push(bootstrap.token);
    await enrollWithBootstrapToken(onB, { bootstrapToken: bootstrap.token, publicKey: admin.publicKey, name: 'admin' });

    const challenge = await createChallenge(onA, { publicKey: admin.publicKey, realm: 'management' });
    const first = await createSession(onB, { challengeId: challenge.id, signature: admin.sign(challenge.challenge), realm: 'management' });
    secrets.push(first.access_token, first.refresh_token);
    const principal = await authenticate(onA, { token: first.access_token, realm: 'management' });

    now += 1000;
    const second = await rotateRefreshToken(onA, { refreshToken: first.refresh_token, realm: 'management' });
    // A lost answer retried within grace, from the other node.
    const third = await rotateRefreshToken(onB, { refreshToken: first.refresh_token, realm: 'management' });
    secrets.push(second.access_token, second.refresh_token, third.access_token, third.refresh_token);

    const phone = deviceKey();
    const prepared = await preparePairing(onA, { principal, realm: 'application', publicKey: phone.publicKey, ttlSeconds: 300 });
    secrets.push(prepared.code, normalizePairingCode(prepared.code));
    const proof = phone.sign(pairingProofString({ nodeId: 'node-test', intentId: prepared.intent_id, publicKey: phone.publicKey }));
    await assert.rejects(
      completePairing(onB, {
        nodeId: 'node-test',
        intentId: prepared.intent_id,
        code: 'ZZZZ-ZZZZ',
        publicKey: phone.publicKey,
        signature: proof,
      }),
    );
    await completePairing(onB, {
      nodeId: 'node-test',
      intentId: prepared.intent_id,
      code: prepared.code,
      publicKey: phone.publicKey,
      signature: proof,
    });

    const latest = await authenticate(onB, { token: third.access_token, realm: 'management' });
    await revokeSession(onA, { principal: latest });

    const dump = await dumpSchema(schema);
    const everything = [...dump.values()].flat().join('\n');
    for (const secret of secrets) {
      assert.ok(!everything.includes(secret), `a secret is stored in the clear (${secret.slice(0, 5)}...)`);
      // The token body alone, too: a stripped prefix is still the token.
      const body = secret.replace(/^svc[abr]_/, '');
      if (body !== secret) assert.ok(!everything.includes(body), `a token body is stored in the clear (${secret.slice(0, 5)}...)`);
    }
    // The scan saw the data: the digests are there.
    for (const token of [bootstrap.token, third.access_token, third.refresh_token, first.refresh_token]) {
      assert.ok(everything.includes(digestToken(token)), 'the digest of a token is stored');
    }
    assert.ok((dump.get('audit_events') ?? []).length >= 8);
    assert.equal(verifyAuditChain(await b.listAuditEvents({ afterSeq: 0, limit: 1e9 })).ok, true);
  } finally {
    await a.close();
    await b.close();
  }
});
