import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { requestLogger, safeLogger } from '../src/http/logging.js';
import { admin, api, startHarness } from './support/harness.js';

function captureLogger(lines: string[]) {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  // pino's standard request serializer logs every header: the app must not let it.
  return pino({ level: 'trace', serializers: { req: pino.stdSerializers.req } }, sink);
}

test('no token, signature or Authorization header ever reaches the log', async () => {
  const lines: string[] = [];
  const h = await startHarness({ socket: false, store: 'memory', logger: captureLogger(lines) });
  try {
    const { pair } = await admin(h);
    await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
    const next = await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: pair.refresh_token } });
    await api(h, 'POST', '/v1/auth/refresh', { body: { refresh_token: `svcr_${'0'.repeat(26)}${'B'.repeat(43)}` } });
    await api(h, 'GET', '/v1/auth/me', { token: `svca_${'0'.repeat(26)}${'C'.repeat(43)}` });
    await api(h, 'POST', '/v1/auth/revoke', { token: next.body.access_token, body: {} });
  } finally {
    await h.close();
  }
  const log = lines.join('\n');
  assert.ok(
    lines.some((l) => l.includes('request completed')),
    'requests are logged',
  );
  assert.ok(
    lines.some((l) => l.includes('"code":"invalid_token"')),
    'refusals are logged with their code',
  );
  assert.doesNotMatch(log, /svc[abr]_[A-Za-z0-9_-]{10}/);
  assert.doesNotMatch(log, /authorization/i);
  assert.doesNotMatch(log, /[0-9a-f]{128}/);
});

test('fields that could hold a secret are redacted even when logged on purpose', () => {
  const lines: string[] = [];
  const log = safeLogger(captureLogger(lines));
  log.info({ body: { refresh_token: 'svcr_secret', signature: 'ab' }, req: { headers: { authorization: 'Bearer x' } } }, 'oops');
  const text = lines.join('\n');
  assert.doesNotMatch(text, /svcr_secret|Bearer x/);
  assert.match(text, /\[redacted\]/);
});

/** A real pino logger at `level` whose children (and theirs: pino children inherit from their parent) are counted. */
function countingLogger(lines: string[], level: string) {
  const logger = captureLogger(lines);
  logger.level = level;
  const made = { children: 0 };
  const child = logger.child.bind(logger);
  Object.defineProperty(logger, 'child', {
    value(this: typeof logger, ...args: Parameters<typeof child>) {
      made.children++;
      return child.apply(this, args);
    },
  });
  return { logger, made };
}

test("a request's own logger is made only when it logs at an enabled level, and then carries its request id", () => {
  const lines: string[] = [];
  const { logger, made } = countingLogger(lines, 'warn');
  const log = requestLogger(logger, { reqId: 'req-7' }, {});
  log.info('below the level');
  log.debug({ detail: 1 }, 'below the level');
  assert.equal(made.children, 0, 'nothing logged, nothing made');
  assert.equal(log.level, 'warn');
  log.warn({ body: { refresh_token: 'svcr_secret' } }, 'at the level');
  log.info('still below the level');
  assert.equal(made.children, 1);
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0] as string) as { reqId: string; msg: string };
  assert.equal(line.reqId, 'req-7');
  assert.equal(line.msg, 'at the level');
  // A route with its own level gets the plain child at once: its level is not the parent's.
  const own = requestLogger(logger, { reqId: 'req-8' }, { level: 'trace' });
  assert.equal(made.children, 2);
  own.trace('logged at the route level');
  assert.equal(JSON.parse(lines[1] as string).reqId, 'req-8');
});

test('requests that log nothing make no logger, and the ones logged keep their request id, over HTTP', async () => {
  const quiet: string[] = [];
  const q = countingLogger(quiet, 'error');
  let h = await startHarness({ socket: false, store: 'memory', logger: q.logger });
  try {
    const { pair } = await admin(h);
    const before = q.made.children;
    for (let i = 0; i < 5; i++) assert.equal((await api(h, 'GET', '/v1/auth/me', { token: pair.access_token })).status, 200);
    assert.equal(q.made.children, before, 'five bearer checks at level error: no logger made');
  } finally {
    await h.close();
  }
  const loud: string[] = [];
  const l = countingLogger(loud, 'info');
  h = await startHarness({ socket: false, store: 'memory', logger: l.logger });
  try {
    const { pair } = await admin(h);
    await api(h, 'GET', '/v1/auth/me', { token: pair.access_token });
  } finally {
    await h.close();
  }
  const completed = loud.map((x) => JSON.parse(x) as { msg?: string; reqId?: string }).filter((x) => x.msg === 'request completed');
  assert.ok(completed.length >= 2, 'requests are logged at info');
  for (const entry of completed) assert.match(entry.reqId ?? '', /^req-/);
  assert.equal(new Set(completed.map((x) => x.reqId)).size, completed.length, 'each request its own id');
});
