// Keeps the README and docs/ in step with the code where a check is cheap: the facts below were
// each found stale once (issue #25). The generated parts of docs/ (errors, configuration,
// openapi.json) have their own tests: packages/core/test/docs.test.ts, ./openapi.test.ts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertionClaims, makePrincipal } from '@svc/core';

const root = new URL('../../../', import.meta.url).pathname;
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

/** The text of a `## heading` section of a Markdown document, up to the next `## `. */
function section(doc: string, heading: string): string {
  const start = doc.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `no section "${heading}"`);
  const end = doc.indexOf('\n## ', start + heading.length + 2);
  return doc.slice(start, end < 0 ? undefined : end);
}

/** Every file of `dir` (recursively) whose name ends in `.ts`. */
function sourcesOf(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

test("the README's layout names every package under packages/ and every folder of the server's sources", () => {
  const layout = section(read('README.md'), '## Layout');
  const named = new Set([...layout.matchAll(/^\s+([a-z][a-z0-9-]*)\/\s/gm)].map((m) => m[1]));
  const packages = readdirSync(join(root, 'packages'), { withFileTypes: true }).filter((e) => e.isDirectory());
  assert.ok(packages.length >= 12);
  for (const pkg of packages) assert.ok(named.has(pkg.name), `README.md's Layout does not name packages/${pkg.name}/`);
  const folders = readdirSync(join(root, 'packages/server/src'), { withFileTypes: true }).filter((e) => e.isDirectory());
  assert.ok(folders.length >= 6);
  for (const f of folders) assert.ok(named.has(f.name), `README.md's Layout does not name the server's ${f.name}/`);
});

test('every docs/*.md is linked from the README, and the README keeps the current bench figures only (the run log is docs/performance.md)', () => {
  const readme = read('README.md');
  for (const name of readdirSync(join(root, 'docs')).filter((n) => n.endsWith('.md'))) {
    assert.ok(readme.includes(`](docs/${name})`), `README.md does not link docs/${name}`);
  }
  const performance = section(readme, '## Performance');
  assert.match(performance, /npm run bench/);
  assert.match(performance, /\]\(docs\/performance\.md\)/);
  const lines = performance.trim().split('\n').length;
  assert.ok(
    lines <= 50,
    `README.md's Performance section has ${lines} lines: keep the current figures there, the history in docs/performance.md`,
  );
});

/**
 * The `surface` label values the sources give the HTTP metrics: the third argument of every
 * `instrumentHttp(app, metrics, '<surface>')` and the `surface` of every `observeRequest({...})`.
 */
function surfaceLabels(): Set<string> {
  const found = new Set<string>();
  for (const pkg of readdirSync(join(root, 'packages'))) {
    let files: string[];
    try {
      files = sourcesOf(join(root, 'packages', pkg, 'src'));
    } catch {
      continue;
    }
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/instrumentHttp\([^;]*?'([a-z-]+)'\s*\)/g)) found.add(m[1] as string);
      for (const m of text.matchAll(/observeRequest\(\{[^}]*?surface:\s*'([a-z-]+)'/g)) found.add(m[1] as string);
    }
  }
  return found;
}

test('the metrics `surface` label values in docs/api.md are exactly those the code sets', () => {
  const code = surfaceLabels();
  assert.ok(code.has('management') && code.has('node'), `the source scan found only ${[...code].join(', ')}`);
  const sentence = /`surface` is ((?:`[a-z-]+`(?:, | or |,? or )?)+)/.exec(read('docs/api.md'));
  assert.ok(sentence !== null, 'docs/api.md no longer says which values `surface` takes');
  const documented = new Set([...(sentence[1] as string).matchAll(/`([a-z-]+)`/g)].map((m) => m[1] as string));
  assert.deepEqual([...documented].sort(), [...code].sort());
});

test("docs/assertion.md's claim table lists exactly the claims of a Svc-Assertion, and the principal's claims", () => {
  const principal = makePrincipal({
    subject: 'sub_01M84XB4VPXQF7VQS6MBFH050T',
    realm: 'application',
    session: 'ses_01M84XB7JK413JQJX2SW4VPAG7',
    device: 'dev_01M84XB67ZNN6J16MCRPGN9WG1',
    // Every attribute known, so that every claim an assertion can carry is in it.
    claims: {
      amr: ['ed25519'],
      auth_time: '2026-11-27T10:00:00.000Z',
      exp: '2026-11-27T10:15:00.000Z',
      email: 'ada@example.com',
      email_verified: true,
      name: 'Ada',
      groups: ['ops'],
    },
  });
  const claims = assertionClaims(principal, {
    issuer: 'node_x',
    audience: 'http://127.0.0.1:3000',
    now: Date.parse('2026-11-27T10:01:00.000Z'),
    jti: 'j',
    method: 'GET',
    htu: 'http://127.0.0.1:8080/',
    jkt: 'thumbprint',
  });
  const table = section(read('docs/assertion.md'), '## What it is')
    .split('\n')
    .filter((l) => l.startsWith('| `'));
  const documented = table.flatMap((row) => [...(row.split('|')[1] as string).matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string));
  assert.deepEqual([...documented].sort(), Object.keys(claims).sort());
  // What each says of the principal's own claims.
  const row = (name: string) => table.find((l) => l.startsWith(`| \`${name}\``)) ?? '';
  for (const key of Object.keys(claims.claims)) assert.match(row('claims'), new RegExp(`\`${key}\``));
  for (const key of ['email', 'email_verified', 'name', 'groups']) assert.ok(row(key) !== '', `${key} has its own row`);
  assert.match(row('sub'), /subject/);
  assert.doesNotMatch(row('sub'), /a device id/);
});

test('every test file the README and docs/ point a reader at exists (tests move between tiers)', () => {
  const docs = [
    'README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
    ...readdirSync(join(root, 'docs/docker')).map((f) => `docs/docker/${f}`),
    ...readdirSync(join(root, 'packages')).map((p) => `packages/${p}/README.md`),
  ];
  let named = 0;
  for (const doc of docs) {
    let text: string;
    try {
      text = read(doc);
    } catch {
      continue;
    }
    for (const [path] of text.matchAll(/packages\/[a-z-]+\/test\/[a-z0-9/-]+\.test\.ts/g)) {
      named++;
      assert.doesNotThrow(() => read(path), `${doc} names ${path}, which does not exist`);
    }
  }
  assert.ok(named >= 10, `found only ${named} test paths in the docs`);
});
