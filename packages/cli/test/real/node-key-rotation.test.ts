import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  createManagementClient,
  loadDeviceKey,
  login,
  type NodeDiscoveryJson,
  type SignedDiagnosticsJson,
  verifyDiagnostics,
} from '@svc/client';
import { canonicalJson, type JsonValue, signAuditCheckpoint } from '@svc/core';
import { createNodeIdentity } from '@svc/server';
import { bash, cleanEnv, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import { enrolledProjectInProcess as enrolledProject, svcInProcess as svc, svcOkInProcess as svcOk } from '../in-process.js';
import { startServe } from '../support/node-serve.js';

/** `curl -sf URL` as an operator runs it, parsed. */
async function curlJson<T>(url: string): Promise<T> {
  const r = await bash(`curl -sf ${url}`);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as T;
}

async function diagnostics(nodeUrl: string, token: string, nonce: string): Promise<SignedDiagnosticsJson> {
  const res = await fetch(`${nodeUrl}/edge/0-alpha/diagnostics`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ nonce }),
  });
  assert.equal(res.status, 200);
  return (await res.json()) as SignedDiagnosticsJson;
}

/** A report as the key `pem` would sign it, claiming to be made at `at`. */
function signedBy(pem: string, base: SignedDiagnosticsJson, at: string): SignedDiagnosticsJson {
  const identity = createNodeIdentity(pem);
  const payload = { ...base.payload, node_id: identity.nodeId, generated_at: at };
  const signature = identity.sign(Buffer.from(canonicalJson(payload as JsonValue), 'utf8')).toString('hex');
  return { ...base, payload, signature, public_key: identity.publicKeyHex, node_id: identity.nodeId };
}

describe('node key rotation', () => {
  const tmp = tempDir();
  after(() => tmp.cleanup());

  test('a running node signs with the rotated key at once; discovery lists the old key with its window; old and new reports verify', async () => {
    const root = join(tmp.dir, 'running');
    const env = cleanEnv({ HOME: root, SVC_CREDENTIALS: join(root, 'creds.json') });
    const p = await enrolledProject(root, { env });
    const nodeKey = join(p.dir, '.svc', 'control', 'node-key.pem');
    const s = await startServe(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', p.dir], {
      env,
      management: true,
    });
    try {
      const access = (await login(createManagementClient({ baseUrl: s.managementUrl as string }), loadDeviceKey(p.keyFile))).access_token;
      const before = await curlJson<NodeDiscoveryJson>(`${s.nodeUrl}/.well-known/edge`);
      assert.deepEqual(before.previous_keys, []);
      assert.match(before.valid_from ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const oldReport = await diagnostics(s.nodeUrl, access, 'nonce-before-rotation');
      const oldPem = readFileSync(nodeKey, 'utf8');

      const rotated = JSON.parse((await svcOk(['node', 'rotate-key', p.dir, '--json'], { env })).stdout) as {
        node_id: string;
        public_key: string;
        valid_from: string;
        previous: { node_id: string; public_key: string; valid_from: string | null; valid_until: string };
      };
      assert.notEqual(rotated.node_id, before.node_id);
      assert.deepEqual(rotated.previous, {
        node_id: before.node_id,
        public_key: before.public_key,
        valid_from: before.valid_from,
        valid_until: rotated.valid_from,
      });
      assert.equal(statSync(nodeKey).mode & 0o777, 0o600);
      assert.notEqual(readFileSync(nodeKey, 'utf8'), oldPem);

      // No restart: the same process answers with the new key.
      const afterRotation = await curlJson<NodeDiscoveryJson>(`${s.nodeUrl}/.well-known/edge`);
      assert.equal(afterRotation.node_id, rotated.node_id);
      assert.equal(afterRotation.public_key, rotated.public_key);
      assert.equal(afterRotation.valid_from, rotated.valid_from);
      assert.deepEqual(afterRotation.previous_keys, [rotated.previous]);
      const newReport = await diagnostics(s.nodeUrl, access, 'nonce-after-rotation');
      assert.equal(newReport.public_key, rotated.public_key);
      assert.equal(newReport.payload.node_id, rotated.node_id);
      assert.deepEqual(newReport.previous_keys, [rotated.previous]);

      // A verifier holding the current discovery document accepts both reports...
      assert.equal(verifyDiagnostics(oldReport, { nonce: 'nonce-before-rotation', keys: afterRotation }), true);
      assert.equal(verifyDiagnostics(newReport, { nonce: 'nonce-after-rotation', keys: afterRotation }), true);
      // ...but not one the retired key signs dated after its retirement (a key leaked later),
      const late = new Date(Date.parse(rotated.previous.valid_until) + 1000).toISOString();
      assert.equal(verifyDiagnostics(signedBy(oldPem, oldReport, late), { nonce: 'nonce-before-rotation', keys: afterRotation }), false);
      // while the same key dated inside its window verifies: the window, not the key, decides.
      const inside = new Date(Date.parse(rotated.previous.valid_until) - 1).toISOString();
      assert.equal(verifyDiagnostics(signedBy(oldPem, oldReport, inside), { nonce: 'nonce-before-rotation', keys: afterRotation }), true);
      // Without the previous keys (a verifier that only knows the new key) the old report is refused.
      assert.equal(verifyDiagnostics(oldReport, { nonce: 'nonce-before-rotation', keys: { public_key: afterRotation.public_key } }), false);

      const trail = (await svcOk(['auth', 'audit', p.dir, '--json'], { env })).stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
      const event = trail.find((e) => e.type === 'node.key_rotated');
      assert.deepEqual(event?.data, { node_id: rotated.node_id, previous_node_id: before.node_id, valid_from: rotated.valid_from });
      assert.match((await svcOk(['auth', 'audit', 'verify', p.dir], { env })).stdout, /^audit chain ok: \d+ events/);
    } finally {
      await s.stop();
    }
  });

  test('checkpoints exported before a rotation still hold; one the retired key signs after its retirement does not', async () => {
    const root = join(tmp.dir, 'checkpoints');
    const env = cleanEnv({ HOME: root });
    const p = await enrolledProject(root, { env });
    const nodeKey = join(p.dir, '.svc', 'control', 'node-key.pem');
    const checkpoints = join(root, 'checkpoints.jsonl');
    await svcOk(['auth', 'audit', 'verify', p.dir, '--export', checkpoints], { env });
    const oldPem = readFileSync(nodeKey, 'utf8');
    const rotated = JSON.parse((await svcOk(['node', 'rotate-key', p.dir, '--json'], { env })).stdout) as { valid_from: string };
    await svcOk(['auth', 'audit', 'verify', p.dir, '--export', checkpoints], { env });
    const ok = await svcOk(['auth', 'audit', 'verify', p.dir, '--checkpoints', checkpoints], { env });
    assert.match(ok.stdout, /2 exported checkpoints hold/);

    const first = JSON.parse(readFileSync(checkpoints, 'utf8').split('\n')[0] as string) as {
      payload: { project: string; length: number; head: string };
    };
    const forged = signAuditCheckpoint(
      {
        project: first.payload.project,
        head: { seq: first.payload.length, hash: first.payload.head },
        now: Date.parse(rotated.valid_from) + 5000,
      },
      createNodeIdentity(oldPem),
    );
    await bash(`printf '%s\\n' '${JSON.stringify(forged)}' >> ${checkpoints}`);
    const r = await svc(['auth', 'audit', 'verify', p.dir, '--checkpoints', checkpoints], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /line 3: other_key/);
  });

  test('a rotation while another holds the lock is refused and changes nothing', async () => {
    const root = join(tmp.dir, 'locked');
    const env = cleanEnv({ HOME: root });
    const p = await enrolledProject(root, { env });
    const control = join(p.dir, '.svc', 'control');
    const pem = readFileSync(join(control, 'node-key.pem'), 'utf8');
    const history = readFileSync(join(control, 'node-key-history.json'), 'utf8');
    writeFileSync(join(control, 'node-key.lock'), '');
    const r = await svc(['node', 'rotate-key', p.dir], { env });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /another node key rotation holds .*node-key\.lock/);
    assert.equal(readFileSync(join(control, 'node-key.pem'), 'utf8'), pem);
    assert.equal(readFileSync(join(control, 'node-key-history.json'), 'utf8'), history);
    rmSync(join(control, 'node-key.lock'));
    await svcOk(['node', 'rotate-key', p.dir], { env });
    assert.notEqual(readFileSync(join(control, 'node-key.pem'), 'utf8'), pem);
    assert.equal(existsSync(join(control, 'node-key.lock')), false);
  });
});
