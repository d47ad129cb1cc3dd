import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AUDIT_SINK_SETTINGS, ConfigError, type EdnValue, validateProjectConfig } from '@svc/core/config';
import { DEFAULT_AUDIT_SINKS } from '../src/audit-sinks-config.js';

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));

function project(extra: Record<string, EdnValue> = {}): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }) }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
    }),
    ...extra,
  });
}

function problemsOf(value: EdnValue): string[] {
  try {
    validateProjectConfig(value, { file: 'p/project.edn' });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.problems.map((p) => `${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

test('without :svc/audit-sinks nothing is shipped, and every key has a default and a meaning', () => {
  const cfg = validateProjectConfig(project(), { file: 'p/project.edn' });
  assert.deepEqual(cfg.auditSinks, {
    file: null,
    fileMaxBytes: 10_485_760,
    fileKeep: 5,
    stdout: false,
    batch: 500,
    pollMilliseconds: 1000,
  });
  assert.deepEqual(cfg.auditSinks, DEFAULT_AUDIT_SINKS);
  for (const s of AUDIT_SINK_SETTINGS) assert.ok(s.meaning.length > 20, `${s.key} says what it means`);
});

test(':svc/audit-sinks is read key by key, and a profile overrides it key by key', () => {
  const value = project({
    ':svc/audit-sinks': m({ ':file': '/var/log/svc/audit.jsonl', ':file-max-bytes': 65_536 }),
    ':svc/profiles': m({ ':k8s': m({ ':svc/audit-sinks': m({ ':stdout': true }) }) }),
  });
  const base = validateProjectConfig(value, { file: 'p/project.edn' });
  assert.equal(base.auditSinks.file, '/var/log/svc/audit.jsonl');
  assert.equal(base.auditSinks.fileMaxBytes, 65_536);
  assert.equal(base.auditSinks.stdout, false);
  const k8s = validateProjectConfig(value, { file: 'p/project.edn', profile: 'k8s' });
  assert.equal(k8s.auditSinks.stdout, true);
  assert.equal(k8s.auditSinks.file, '/var/log/svc/audit.jsonl');
});

test('unknown keys, wrong types and sizes out of bounds in :svc/audit-sinks are all refused at load', () => {
  assert.deepEqual(
    problemsOf(project({ ':svc/audit-sinks': m({ ':file': 7, ':stdout': 'yes', ':file-max-bytes': 10, ':syslog': true }) })),
    [
      ':svc/audit-sinks :file: expected a file path string, found number 7',
      ':svc/audit-sinks :stdout: expected true or false, found string "yes"',
      ':svc/audit-sinks :file-max-bytes: expected a whole number from 4096 to 1073741824, found number 10',
      ':svc/audit-sinks :syslog: unknown key; expected one of :file, :file-max-bytes, :file-keep, :stdout, :batch, :poll-milliseconds',
    ],
  );
  assert.deepEqual(problemsOf(project({ ':svc/audit-sinks': 'stdout' })), [
    ':svc/audit-sinks: expected a map such as {:file "audit.jsonl" :stdout true}, found string "stdout"',
  ]);
});
