import { readFileSync, writeFileSync } from 'node:fs';
import { GENERATED_DOCS, withGenerated } from './docs.js';

const root = new URL('../', import.meta.url);
for (const [path, render] of Object.entries(GENERATED_DOCS)) {
  const url = new URL(path, root);
  const before = readFileSync(url, 'utf8');
  const after = withGenerated(before, render());
  if (after !== before) {
    writeFileSync(url, after);
    console.log(`updated ${path}`);
  }
}
