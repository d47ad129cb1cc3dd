// Which node and which cluster answered (#28 part 3): two `svc serve` nodes, each with its own
// control directory (its own node key), on one PostgreSQL store. A pairing prepared on node A and
// completed on node B names both nodes and their one cluster, in the answers, in the CLI's output
// and in the audit events; discovery, status and signed diagnostics name the same cluster on both.
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CLUSTER_ID_PATTERN } from '@svc/core';
import { cleanEnv, enrolledProject, keygen, type StartedProcess, svcOk, tempDir, withTimeout } from '../helpers.js';
import { currentCredentials } from '../support/credentials-file.js';
import { type ServedUrls, serveAll } from '../support/serve-all.js';
import { auditEvents, createSchemas, writePostgresProject } from '../support/store-projects.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON answers are inspected field by field
type Json = any;

describe('two svc serve nodes on one PostgreSQL store: pairing and discovery say which node and which cluster answered', () => {
  const tmp = tempDir('svc-cluster-pairing-');
  const env = cleanEnv({ HOME: tmp.dir, SVC_CREDENTIALS: join(tmp.dir, 'creds.json') });
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device'), SVC_CREDENTIALS: join(tmp.dir, 'device', 'creds.json') });
  const schemas = createSchemas();
  const nodes: StartedProcess<ServedUrls>[] = [];
  let dir = '';
  let a: ServedUrls;
  let b: ServedUrls;
  const nodeEnv = (name: string) => ({ ...env, SVC_CONTROL_DIR: join(tmp.dir, `control-${name}`) });
  const sinkDir = join(tmp.dir, 'log');
  const discovery = async (node: string): Promise<Json> => (await fetch(`${node}/.well-known/edge`)).json();

  before(async () => {
    await writePostgresProject(tmp.dir, { schema: schemas.fresh(), env });
    const p = await enrolledProject(tmp.dir, { env });
    dir = p.dir;
    // One sink directory for both nodes (as on one host): `{node}` gives each node its own file.
    mkdirSync(sinkDir, { mode: 0o700 });
    const edn = join(dir, 'project.edn');
    writeFileSync(
      edn,
      readFileSync(edn, 'utf8').replace(/^\{/, `{:svc/audit-sinks {:file "${sinkDir}/audit-{node}.jsonl" :poll-milliseconds 100}\n `),
    );
    for (const name of ['a', 'b']) nodes.push(await serveAll(dir, nodeEnv(name)));
    [a, b] = nodes.map((n) => n.ready) as [ServedUrls, ServedUrls];
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', a.management], { env });
  });

  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('discovery, status and signed diagnostics of both nodes name two node ids and one cluster id', async () => {
    const [onA, onB] = [await discovery(a.node), await discovery(b.node)];
    assert.notEqual(onA.node_id, onB.node_id, 'each node keeps its own node key');
    assert.match(onA.cluster_id, CLUSTER_ID_PATTERN);
    assert.equal(onB.cluster_id, onA.cluster_id);
    const token = currentCredentials(join(tmp.dir, 'creds.json')).access_token as string;
    const status: Json = await (await fetch(`${a.node}/edge/0-alpha/status`, { headers: { authorization: `Bearer ${token}` } })).json();
    assert.deepEqual([status.node_id, status.cluster_id], [onA.node_id, onA.cluster_id]);
    const diag: Json = await (
      await fetch(`${a.node}/edge/0-alpha/diagnostics`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ nonce: 'cluster-pairing-nonce' }),
      })
    ).json();
    assert.deepEqual([diag.payload.node_id, diag.payload.cluster_id], [onA.node_id, onA.cluster_id]);
  });

  test('a pairing prepared on node A and completed on node B names A as preparer, B as completer, and one cluster', async () => {
    const [onA, onB] = [await discovery(a.node), await discovery(b.node)];
    mkdirSync(join(tmp.dir, 'device'), { recursive: true });
    const keyFile = join(tmp.dir, 'device', 'app.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const prepared: Json = JSON.parse(
      (await svcOk(['auth', 'pair', '--node-url', a.node, '--realm', 'application', '--device-key', pub, '--json'], { env })).stdout,
    );
    assert.deepEqual([prepared.node_id, prepared.cluster_id], [onA.node_id, onA.cluster_id]);
    const completeArgs = ['auth', 'pair', 'complete', '--node-url', b.node, '--node-id', onB.node_id, '--intent', prepared.intent_id];
    const done: Json = JSON.parse(
      (await svcOk([...completeArgs, '--code', prepared.code, '--key', keyFile, '--json'], { env: deviceEnv })).stdout,
    );
    assert.equal(done.prepared_by_node, onA.node_id);
    assert.equal(done.completed_by_node, onB.node_id);
    assert.equal(done.cluster_id, onA.cluster_id);
    assert.equal(done.device.public_key, pub);

    const events = (await auditEvents(dir, nodeEnv('a'))).filter((e) => e.data.intent_id === prepared.intent_id);
    assert.deepEqual(
      events.map((e) => [e.type, e.data.prepared_by_node, e.data.completed_by_node ?? null, e.data.cluster_id]),
      [
        ['pairing.prepared', onA.node_id, null, onA.cluster_id],
        ['pairing.completed', onA.node_id, onB.node_id, onA.cluster_id],
      ],
    );
  });

  test('the human output of svc auth pair and pair complete shows the cluster and both nodes', async () => {
    const [onA, onB] = [await discovery(a.node), await discovery(b.node)];
    const keyFile = join(tmp.dir, 'device', 'second.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const out = (await svcOk(['auth', 'pair', '--node-url', a.node, '--realm', 'application', '--device-key', pub], { env })).stdout;
    assert.match(out, new RegExp(`^node id: {2}${onA.node_id}$`, 'm'));
    assert.match(out, new RegExp(`^cluster: {2}${onA.cluster_id} `, 'm'));
    const intent = /^intent: {3}(\S+)$/m.exec(out)?.[1];
    const code = /^code: {5}(\S+)/m.exec(out)?.[1];
    assert.ok(intent !== undefined && code !== undefined, out);
    const done = (
      await svcOk(
        ['auth', 'pair', 'complete', '--node-url', b.node, '--node-id', onB.node_id, '--intent', intent, '--code', code, '--key', keyFile],
        { env: deviceEnv },
      )
    ).stdout;
    assert.match(done, new RegExp(`^paired with node ${onB.node_id}$`, 'm'));
    assert.match(done, new RegExp(`^prepared: on node ${onA.node_id} \\(same cluster\\)$`, 'm'));
    assert.match(done, new RegExp(`^cluster: {2}${onA.cluster_id}$`, 'm'));
  });

  test('audit shipping with one sink path on one host: each node writes its own {node} file, every event once and in chain order, each line naming its node', async () => {
    const [onA, onB] = [await discovery(a.node), await discovery(b.node)];
    const length = (await auditEvents(dir, nodeEnv('a'))).length;
    assert.ok(length > 0);
    const linesOf = (nodeId: string): Json[] => {
      const file = join(sinkDir, `audit-${nodeId}.jsonl`);
      try {
        return readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l))
          .filter((l) => l.record === 'audit.event');
      } catch {
        return [];
      }
    };
    await withTimeout(
      (async () => {
        while (linesOf(onA.node_id).length < length || linesOf(onB.node_id).length < length) await new Promise((r) => setTimeout(r, 100));
      })(),
      `both nodes shipping all ${length} events to their own file`,
      30_000,
    );
    assert.deepEqual(readdirSync(sinkDir).sort(), [`audit-${onA.node_id}.jsonl`, `audit-${onB.node_id}.jsonl`].sort());
    for (const node of [onA.node_id, onB.node_id]) {
      const lines = linesOf(node);
      assert.deepEqual(
        lines.map((l) => l.seq),
        Array.from({ length: lines.length }, (_, i) => i + 1),
        `${node}: every event once, in chain order`,
      );
      assert.ok(lines.length >= length);
      assert.deepEqual([...new Set(lines.map((l) => l.shipped_by_node))], [node], 'each line names the node that shipped it');
    }
  });
});
