import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { safeLogger } from '../src/http/logging.js';
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
  const h = await startHarness({ logger: captureLogger(lines) });
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
