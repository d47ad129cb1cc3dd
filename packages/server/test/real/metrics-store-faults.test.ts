import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type AuthDeps, issueBootstrapToken, silentLogger } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { openSqliteStore } from 'svc-store-sqlite';
import { buildManagementApp, createServiceMetrics, instrumentStore, type ServiceMetrics } from '../../src/index.js';
import { createFakeClock, type DeviceKey, newDeviceKey } from '../support/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-metrics-faults-'));
const file = join(dir, 'control.db');
let app: FastifyInstance;
let metrics: ServiceMetrics;
let close: () => Promise<void>;
let base: string;
let key: DeviceKey;

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
async function post(path: string, body: unknown): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text), text };
}

async function sample(name: string, labels: string): Promise<number> {
  const line = (await metrics.registry.metrics())
    .split('\n')
    .find((l) => l.startsWith(`${name}{${labels}} `) || (labels === '' && l.startsWith(`${name} `)));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

before(async () => {
  const real = await openSqliteStore({ file });
  const clock = createFakeClock();
  metrics = createServiceMetrics({ store: real });
  const deps: AuthDeps = {
    store: instrumentStore(real, metrics),
    clock,
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000SERVERTESTPRJ0',
    settings: DEFAULT_AUTH_SETTINGS,
  };
  await real.initProject({ projectId: deps.projectId, createdAt: clock.now() });
  app = await buildManagementApp({ deps, logger: false, metrics });
  await app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  close = async () => {
    await app.close();
    await real.close();
  };
  key = newDeviceKey();
  const { token } = await issueBootstrapToken(deps, { recovery: false });
  const enrolled = await post('/v1/auth/enroll', { bootstrap_token: token, public_key: key.publicKeyHex });
  assert.equal(enrolled.status, 201, enrolled.text);
});
after(async () => {
  await close?.();
  rmSync(dir, { recursive: true, force: true });
});

test('a sign-in whose session write fails in the database counts no sign-in, and the failed store operation is timed as an error', async () => {
  const signIns = await sample('svc_signins_total', 'realm="management"');
  const failedOps = await sample('svc_store_operation_duration_seconds_count', 'operation="createSession",outcome="error"');
  const okOps = await sample('svc_store_operation_duration_seconds_count', 'operation="createSession",outcome="ok"');
  const events = await sample('svc_audit_events_total', 'type="session.created"');
  // The fault: the sessions table disappears under the running service (another connection renames it).
  const other = new Database(file);
  try {
    other.exec('ALTER TABLE sessions RENAME TO sessions_gone');
  } finally {
    other.close();
  }
  const c = await post('/v1/auth/challenges', { public_key: key.publicKeyHex });
  assert.equal(c.status, 201, c.text);
  const s = await post('/v1/auth/sessions', { challenge_id: c.body.challenge_id, signature: key.signHex(c.body.challenge) });
  assert.ok(s.status >= 500, s.text);
  assert.equal(await sample('svc_signins_total', 'realm="management"'), signIns);
  assert.equal(await sample('svc_audit_events_total', 'type="session.created"'), events);
  assert.equal(await sample('svc_store_operation_duration_seconds_count', 'operation="createSession",outcome="error"'), failedOps + 1);
  assert.equal(await sample('svc_store_operation_duration_seconds_count', 'operation="createSession",outcome="ok"'), okOps);
  assert.equal(await sample('svc_http_failures_total', `surface="management",code="${s.body.code}"`), 1);
});
