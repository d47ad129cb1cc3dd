import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { auditSinkPathFor, type SinkPathStat, sinkDirectoryRefusal, sinkFileRefusal } from '../src/index.js';

const file = (mode: number, uid = 1000): SinkPathStat => ({ uid, mode: 0o100000 | mode, isFile: () => true, isDirectory: () => false });
const directory = (mode: number): SinkPathStat => ({ uid: 1000, mode: 0o040000 | mode, isFile: () => false, isDirectory: () => true });

describe('audit sink file rules', () => {
  test('an owner-only regular file of the service user may take the trail', () => {
    assert.equal(sinkFileRefusal(file(0o600), 1000), null);
    assert.equal(sinkFileRefusal(file(0o400), 1000), null);
  });

  test('a file group or others can read or write is refused, whichever bit it is', () => {
    for (const mode of [0o644, 0o640, 0o620, 0o604, 0o602, 0o666]) {
      assert.match(sinkFileRefusal(file(mode), 1000) ?? '', new RegExp(`mode ${mode.toString(8)}`), mode.toString(8));
    }
  });

  test('a file owned by another uid is refused; without a uid (no POSIX ids) only the mode counts', () => {
    assert.match(sinkFileRefusal(file(0o600, 0), 1000) ?? '', /owned by uid 0/);
    assert.equal(sinkFileRefusal(file(0o600, 0), null), null);
  });

  test('something that is not a regular file (a FIFO, a device, a directory) is refused', () => {
    assert.match(sinkFileRefusal({ ...file(0o600), isFile: () => false }, 1000) ?? '', /not a regular file/);
  });

  test('a directory its group or others can write is refused, sticky or not (0775 included); 0755, 0750 and 0700 are not', () => {
    assert.match(sinkDirectoryRefusal(directory(0o777)) ?? '', /lets group or others write/);
    assert.match(sinkDirectoryRefusal(directory(0o1777)) ?? '', /1777/);
    for (const mode of [0o775, 0o770, 0o2775, 0o757]) {
      assert.match(sinkDirectoryRefusal(directory(mode)) ?? '', new RegExp(`mode ${mode.toString(8)}`), mode.toString(8));
    }
    for (const mode of [0o755, 0o750, 0o700]) assert.equal(sinkDirectoryRefusal(directory(mode)), null, mode.toString(8));
    assert.match(sinkDirectoryRefusal({ ...directory(0o700), isDirectory: () => false }) ?? '', /not a directory/);
  });
});

describe('the {node} placeholder of the sink path', () => {
  test('is replaced by the shipping node id, everywhere it occurs; a path without it is kept', () => {
    assert.equal(auditSinkPathFor('/var/log/svc/audit-{node}.jsonl', 'AAAA-0'), '/var/log/svc/audit-AAAA-0.jsonl');
    assert.equal(auditSinkPathFor('/l/{node}/a-{node}.jsonl', 'B-1'), '/l/B-1/a-B-1.jsonl');
    assert.equal(auditSinkPathFor('/var/log/svc/audit.jsonl', null), '/var/log/svc/audit.jsonl');
  });
  test('without a node key a {node} path is refused: nodes would otherwise share one file', () => {
    assert.throws(() => auditSinkPathFor('/var/log/svc/audit-{node}.jsonl', null), /no node key/);
  });
});
