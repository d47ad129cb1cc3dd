// `:svc/app-brand` and `:provider/label`: validated at load, with the file and key named.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AssetReader, ConfigError, type ConfigProblem, type EdnValue, validateProjectConfig } from '@svc/core/config';
import { APP_BRAND_LOGO_MAX_BYTES, contrastWithWhite } from '../src/app-config-reader.js';
import { readProviderModuleConfig } from '../src/provider-config.js';

const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
const SVG = new TextEncoder().encode('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><rect width="4" height="4"/></svg>');

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

/** Files the reader knows: everything else does not exist. */
function files(known: Record<string, Uint8Array>): AssetReader {
  return (path) => (path in known ? { bytes: known[path] as Uint8Array } : { problem: `${path} does not exist` });
}

const load = (brand: EdnValue, readAsset: AssetReader = files({})) =>
  validateProjectConfig(project({ ':svc/app-brand': brand }), { file: 'p/project.edn', readAsset }).app.brand;

function problemsOf(brand: EdnValue, readAsset: AssetReader = files({})): string[] {
  try {
    validateProjectConfig(project({ ':svc/app-brand': brand }), { file: 'p/project.edn', readAsset });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    for (const p of e.problems) assert.equal(p.file, 'p/project.edn');
    return e.problems.map((p) => `${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

describe(':svc/app-brand', () => {
  test('absent: no brand; a name alone: no logo, the default accent', () => {
    assert.equal(validateProjectConfig(project(), { file: 'p/project.edn' }).app.brand, null);
    assert.deepEqual(load(m({ ':name': 'Acme' })), { name: 'Acme', accent: null, logo: null });
  });

  test('a PNG or SVG logo is read at load into a data: URI; the accent kept', () => {
    const png = load(m({ ':name': 'Acme', ':logo': 'brand/logo.png', ':accent': '#0F766E' }), files({ 'brand/logo.png': PNG }));
    assert.equal(png?.accent, '#0f766e');
    assert.equal(png?.logo, `data:image/png;base64,${Buffer.from(PNG).toString('base64')}`);
    const svg = load(m({ ':name': 'Acme', ':logo': 'logo.svg' }), files({ 'logo.svg': SVG }));
    assert.match(svg?.logo ?? '', /^data:image\/svg\+xml;base64,/);
  });

  test('an accent too light for white text is refused with its contrast (WCAG AA 4.5:1)', () => {
    assert.ok(contrastWithWhite('#0f766e') >= 4.5);
    assert.ok(contrastWithWhite('#ffcc00') < 4.5);
    const [problem, ...rest] = problemsOf(m({ ':name': 'Acme', ':accent': '#ffcc00' }));
    assert.deepEqual(rest, []);
    assert.match(
      problem ?? '',
      /^:svc\/app-brand :accent: #ffcc00 is too light for the white text on it \(contrast 1\.\d\d:1, at least 4\.5:1/,
    );
  });

  test('a malformed accent, an empty or too long name, an unknown key: each refused by its key', () => {
    const problems = problemsOf(m({ ':name': 'x'.repeat(65), ':accent': 'teal', ':colour': '#000000' }));
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.ok(problems.some((p) => p.startsWith(':svc/app-brand :name: expected the product name, 1 to 64 characters')));
    assert.ok(problems.some((p) => p.startsWith(':svc/app-brand :accent: expected a colour written #rrggbb')));
    assert.ok(problems.some((p) => p.startsWith(':svc/app-brand :colour: unknown key')));
    assert.match(problemsOf(m({ ':name': '  ' }))[0] ?? '', /^:svc\/app-brand :name:/);
    assert.match(problemsOf('Acme')[0] ?? '', /^:svc\/app-brand: expected \{:name/);
  });

  test('a missing logo, one over 64 KiB, or one that is neither PNG nor SVG is refused at load, naming the file', () => {
    assert.deepEqual(problemsOf(m({ ':name': 'Acme', ':logo': 'brand/missing.png' })), [
      ':svc/app-brand :logo: cannot read "brand/missing.png": brand/missing.png does not exist',
    ]);
    const big = new Uint8Array(APP_BRAND_LOGO_MAX_BYTES + 1);
    big.set(PNG);
    assert.match(
      problemsOf(m({ ':name': 'Acme', ':logo': 'big.png' }), files({ 'big.png': big }))[0] ?? '',
      /^:svc\/app-brand :logo: "big\.png" is 65537 bytes; a logo is at most 64 KiB/,
    );
    const html = new TextEncoder().encode('<html><script>alert(1)</script></html>');
    assert.deepEqual(problemsOf(m({ ':name': 'Acme', ':logo': 'logo.html' }), files({ 'logo.html': html })), [
      ':svc/app-brand :logo: "logo.html" is neither a PNG nor an SVG image',
    ]);
  });
});

describe(':provider/label', () => {
  const read = (label?: EdnValue) => {
    const problems: ConfigProblem[] = [];
    const config = new Map<string, EdnValue>([[':oidc/issuer', 'https://idp.example.com']]);
    if (label !== undefined) config.set(':provider/label', label);
    const { policy } = readProviderModuleConfig('corp', config, { file: 'p/project.edn', key: ':svc/modules :corp :config' }, problems);
    return { label: policy.label, problems: problems.map((p) => p.key) };
  };

  test('kept trimmed as the policy label; absent: null; empty, too long or not a string refused by its key', () => {
    assert.deepEqual(read(' Acme SSO '), { label: 'Acme SSO', problems: [] });
    assert.deepEqual(read(), { label: null, problems: [] });
    for (const bad of ['', 'x'.repeat(65), 7]) {
      assert.deepEqual(read(bad).problems, [':svc/modules :corp :config :provider/label'], String(bad));
    }
  });
});
