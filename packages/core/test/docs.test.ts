import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { ERROR_CODES } from '@svc/core';
import { GENERATED_FILES, regenerated } from '../../../scripts/docs.js';

const root = new URL('../../../', import.meta.url);

test('the generated parts of docs/ are in step with the code (run `npm run docs`)', () => {
  for (const path of GENERATED_FILES) {
    const doc = readFileSync(new URL(path, root), 'utf8');
    assert.equal(doc, regenerated(path, doc), `${path} is out of date`);
  }
});

test('docs/errors.md lists every error code with its status', () => {
  const doc = readFileSync(new URL('docs/errors.md', root), 'utf8');
  for (const [code, e] of Object.entries(ERROR_CODES)) assert.match(doc, new RegExp(`\\| ${e.status} \\| \`${code}\` \\|`));
});
