import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEDNString } from 'edn-data';
import { setPackagePin } from '../src/index.js';

const A = 'a'.repeat(64);
const B = 'b'.repeat(64);

type Raw = { map?: [unknown, unknown][]; key?: string };
/** Reads `:svc/packages` back with edn-data, as `{ name: { version, sha256 } }`. */
function pins(text: string): Record<string, { version: unknown; sha256: unknown }> {
  const root = parseEDNString(text, { mapAs: 'doubleArray', keywordAs: 'object', listAs: 'array', setAs: 'array' }) as Raw;
  const get = (m: unknown, k: string) => (m as Raw).map?.find(([key]) => (key as Raw).key === k)?.[1];
  const out: Record<string, { version: unknown; sha256: unknown }> = {};
  for (const [name, pin] of (get(root, 'svc/packages') as Raw | undefined)?.map ?? []) {
    out[name as string] = { version: get(pin, 'version'), sha256: get(pin, 'sha256') };
  }
  return out;
}

const CONTRACT_EXAMPLE = `{:svc/project  "demo"
 :svc/packages {"svc-store-sqlite" {:version "0.1.0" :sha256 "${A}"}}
 :svc/modules  {:store {:package "svc-store-sqlite" :activate [:svc/store]}
                :auth  {:module :svc/auth
                        :config {:auth/store :store}}}}
`;

test('setPackagePin replaces the pin of an existing package and nothing else', () => {
  const out = setPackagePin(CONTRACT_EXAMPLE, 'svc-store-sqlite', { version: '0.2.0', sha256: B });
  assert.deepEqual(pins(out), { 'svc-store-sqlite': { version: '0.2.0', sha256: B } });
  assert.equal(out, CONTRACT_EXAMPLE.replace(`{:version "0.1.0" :sha256 "${A}"}`, `{:version "0.2.0" :sha256 "${B}"}`));
});

test('setPackagePin inserts a new package beside the existing ones', () => {
  const out = setPackagePin(CONTRACT_EXAMPLE, 'svc-store-postgres', { version: '0.1.0', sha256: B });
  assert.deepEqual(pins(out), {
    'svc-store-sqlite': { version: '0.1.0', sha256: A },
    'svc-store-postgres': { version: '0.1.0', sha256: B },
  });
  assert.ok(out.includes(':svc/modules  {:store {:package "svc-store-sqlite" :activate [:svc/store]}'));
});

test('setPackagePin creates :svc/packages when it is absent', () => {
  const text = '{:svc/project "demo"\n :svc/modules {}}\n';
  const out = setPackagePin(text, 'svc-store-sqlite', { version: '0.1.0', sha256: A });
  assert.deepEqual(pins(out), { 'svc-store-sqlite': { version: '0.1.0', sha256: A } });
  assert.equal(out, `{:svc/project "demo"\n :svc/packages {"svc-store-sqlite" {:version "0.1.0" :sha256 "${A}"}}\n :svc/modules {}}\n`);
});

test('setPackagePin on a one-line file and on an empty :svc/packages', () => {
  const one = setPackagePin('{:svc/project "demo" :svc/modules {}}', 'svc-store-sqlite', { version: '0.1.0', sha256: A });
  assert.deepEqual(pins(one), { 'svc-store-sqlite': { version: '0.1.0', sha256: A } });
  const empty = setPackagePin('{:svc/project "demo" :svc/packages {}}', 'svc-store-sqlite', { version: '0.1.0', sha256: A });
  assert.deepEqual(pins(empty), { 'svc-store-sqlite': { version: '0.1.0', sha256: A } });
});

test('setPackagePin keeps comments, discarded forms and layout', () => {
  const text = [
    ';; demo project: pinned packages below',
    '{:svc/project "demo" ; the name',
    ` :svc/packages {"svc-store-sqlite" {:version "0.1.0" :sha256 "${A}"} ; the embedded store`,
    '                #_"svc-store-old" #_{:version "0.0.1"}',
    '                "other-addon" {:version "1.0.0"}} ; end of packages',
    ' ;; modules',
    ' :svc/modules {:store {:package "svc-store-sqlite" :activate [:svc/store]} ; "svc-store-sqlite" {',
    '               :note "a \\"quoted\\" } brace"}}',
    '',
  ].join('\n');
  const replaced = setPackagePin(text, 'svc-store-sqlite', { version: '0.3.0', sha256: B });
  assert.equal(replaced, text.replace(`{:version "0.1.0" :sha256 "${A}"}`, `{:version "0.3.0" :sha256 "${B}"}`));
  const inserted = setPackagePin(text, 'svc-store-postgres', { version: '0.1.0', sha256: B });
  assert.deepEqual(pins(inserted), {
    'svc-store-sqlite': { version: '0.1.0', sha256: A },
    'other-addon': { version: '1.0.0', sha256: undefined },
    'svc-store-postgres': { version: '0.1.0', sha256: B },
  });
  for (const comment of ['; the name', '; the embedded store', '; end of packages', ';; modules', ';; demo project', '#_"svc-store-old"']) {
    assert.ok(inserted.includes(comment), comment);
  }
  // The closing brace shares the last entry's line, so the new entry joins that line.
  assert.ok(
    inserted.includes(`"other-addon" {:version "1.0.0"} "svc-store-postgres" {:version "0.1.0" :sha256 "${B}"}} ; end of packages`),
  );
});

test('setPackagePin puts a new entry on its own line when the map is laid out one entry per line', () => {
  const text = `{:svc/project "demo"\n :svc/packages {"a-addon" {:version "1.0.0"} ; first\n                "b-addon" {:version "1.0.0"} ; second\n                }\n :svc/modules {}}\n`;
  const out = setPackagePin(text, 'svc-store-sqlite', { version: '0.1.0', sha256: A });
  assert.equal(
    out,
    text.replace(
      '"b-addon" {:version "1.0.0"} ; second\n',
      `"b-addon" {:version "1.0.0"} ; second\n                "svc-store-sqlite" {:version "0.1.0" :sha256 "${A}"}\n`,
    ),
  );
  assert.equal(pins(out)['svc-store-sqlite']?.sha256, A);
});

test('setPackagePin refuses what it cannot edit faithfully', () => {
  assert.throws(() => setPackagePin('[:not-a-map]', 'svc-store-sqlite', { version: '0.1.0', sha256: A }), TypeError);
  assert.throws(() => setPackagePin('{:svc/packages nil}', 'svc-store-sqlite', { version: '0.1.0', sha256: A }), TypeError);
  assert.throws(() => setPackagePin('{:svc/project "demo"', 'svc-store-sqlite', { version: '0.1.0', sha256: A }), SyntaxError);
  assert.throws(() => setPackagePin('{}', 'svc-store-sqlite', { version: '0.1.0', sha256: 'ABC' }), TypeError);
  assert.throws(() => setPackagePin('{}', '../evil', { version: '0.1.0', sha256: A }), TypeError);
  assert.throws(() => setPackagePin('{}', 'svc-store-sqlite', { version: '0.1.0" :sha256 "x', sha256: A }), TypeError);
});
