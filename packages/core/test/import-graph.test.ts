import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

// Core's modules form a graph without a circle, type-only imports included: a type-only circle
// costs nothing at run time, but it says a type lives in the wrong module (the architecture
// test checks run-time circles of every package; this one is stricter, for core).

const src = new URL('../src/', import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** Every relative module `file` imports or re-exports, `import type` and `export type` included. */
export function relativeImportsOf(file: string, text = readFileSync(file, 'utf8')): string[] {
  return [
    ...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'";]*?from\s*['"](\.[^'"]+)['"]/g),
    ...text.matchAll(/import\(\s*['"](\.[^'"]+)['"]\s*\)/g),
  ].map((m) => resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts')));
}

/** The first circle found in `graph` (file → the files it imports), as the path that closes it, or null. */
export function findCycle(graph: ReadonlyMap<string, readonly string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): string[] | null => {
    if (state.get(node) === 'done') return null;
    if (state.get(node) === 'open') return [...stack.slice(stack.indexOf(node)), node];
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      const found = visit(next);
      if (found !== null) return found;
    }
    stack.pop();
    state.set(node, 'done');
    return null;
  };
  for (const node of graph.keys()) {
    const found = visit(node);
    if (found !== null) return found;
  }
  return null;
}

test('the cycle finder names a circle, a type-only one included, and passes a graph without one', () => {
  const file = join(src, 'a.ts');
  const imports = relativeImportsOf(file, "import type { B } from './b.js';\nexport { C } from './c.js';\nimport { D } from './d.js';\n");
  assert.deepEqual(imports, [join(src, 'b.ts'), join(src, 'c.ts'), join(src, 'd.ts')]);
  const circle = new Map([
    ['a', ['b']],
    ['b', ['c']],
    ['c', ['a']],
  ]);
  assert.deepEqual(findCycle(circle), ['a', 'b', 'c', 'a']);
  const line = new Map([
    ['a', ['b', 'c']],
    ['b', ['c']],
    ['c', []],
  ]);
  assert.equal(findCycle(line), null);
});

test("core's modules import each other without a circle, type-only imports included", () => {
  const files = sources(src);
  assert.ok(files.length > 40, `expected core's sources under ${src}, found ${files.length} files`);
  const graph = new Map(files.map((file) => [file, relativeImportsOf(file)]));
  const cycle = findCycle(graph);
  assert.equal(cycle, null, `import circle in core: ${cycle?.map((f) => relative(src, f)).join(' -> ')}`);
});
