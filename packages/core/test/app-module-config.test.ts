import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, type EdnValue, validateProjectConfig } from '@svc/core/config';

// Application modules (`:activate [:svc/app]`) in project.edn: what loads, and which privileged
// exports a package is refused, each in one line naming the package and the export.
const kw = (keyword: string) => ({ keyword });
const m = (entries: Record<string, EdnValue>): EdnValue => new Map(Object.entries(entries));
const SHA = 'b'.repeat(64);

function project(modules: Record<string, EdnValue>, pins: Record<string, EdnValue> = {}): EdnValue {
  return m({
    ':svc/project': 'demo',
    ':svc/packages': m({ 'svc-store-sqlite': m({ ':version': '0.1.0', ':sha256': 'a'.repeat(64) }), ...pins }),
    ':svc/modules': m({
      ':store': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/store')] }),
      ':auth': m({ ':module': kw('svc/auth'), ':config': m({ ':auth/store': kw('store') }) }),
      ...modules,
    }),
  });
}
const pinned = (name: string, sha256: string | null = SHA) =>
  ({ [name]: m({ ':version': '1.0.0', ...(sha256 === null ? {} : { ':sha256': sha256 }) }) }) as Record<string, EdnValue>;

function problemsOf(value: EdnValue): string[] {
  try {
    validateProjectConfig(value, { file: 'p/project.edn' });
  } catch (e) {
    assert.ok(e instanceof ConfigError);
    return e.problems.map((p) => `${p.file}: ${p.key}: ${p.message}`);
  }
  assert.fail('expected a ConfigError');
}

test('an application module from a pinned package activates :svc/app and loads', () => {
  const cfg = validateProjectConfig(
    project(
      { ':web': m({ ':package': 'acme-web', ':activate': [kw('svc/app')], ':config': m({ ':web/title': 'x' }) }) },
      pinned('acme-web'),
    ),
    { file: 'p/project.edn' },
  );
  assert.deepEqual(cfg.modules.web?.activate, ['svc/app']);
  assert.equal(cfg.modules.web?.package, 'acme-web');
});

test('an application package activating :svc/auth is refused, naming the package and the export', () => {
  assert.deepEqual(
    problemsOf(project({ ':web': m({ ':package': 'evil-app', ':activate': [kw('svc/app'), kw('svc/auth')] }) }, pinned('evil-app'))),
    [
      'p/project.edn: :svc/modules :web :activate: package "evil-app" may not activate the privileged export :svc/auth: identity is the built-in {:module :svc/auth}; no package can provide or replace it',
    ],
  );
});

test('an application package activating :svc/auth-provider is refused, naming the package and the export', () => {
  const problems = problemsOf(
    project({ ':web': m({ ':package': 'evil-app', ':activate': [kw('svc/app'), kw('svc/auth-provider')] }) }, pinned('evil-app')),
  );
  assert.equal(problems.length, 1);
  assert.match(
    problems[0] ?? '',
    /^p\/project\.edn: :svc\/modules :web :activate: package "evil-app" may not activate the privileged export :svc\/auth-provider: /,
  );
});

test('an application package also claiming :svc/store is refused, naming the package and the export', () => {
  const problems = problemsOf(
    project({ ':web': m({ ':package': 'evil-app', ':activate': [kw('svc/app'), kw('svc/store')] }) }, pinned('evil-app')),
  );
  assert.deepEqual(problems, [
    'p/project.edn: :svc/modules :web :activate: package "evil-app" may not activate the privileged export :svc/store: an application module (:svc/app) never holds the control store',
  ]);
});

test("an application module from the control store's package is refused: it would run the store's code as an application", () => {
  const problems = problemsOf(project({ ':web': m({ ':package': 'svc-store-sqlite', ':activate': [kw('svc/app')] }) }));
  assert.equal(problems.length, 1);
  assert.match(
    problems[0] ?? '',
    /^p\/project\.edn: :svc\/modules :web :package: package "svc-store-sqlite" may not activate the privileged export :svc\/store for an application: it holds the control store \(:auth\/store :store\)/,
  );
});

test('an application module from a package pinned without :sha256 is refused: its archive could not be verified', () => {
  const problems = problemsOf(project({ ':web': m({ ':package': 'acme-web', ':activate': [kw('svc/app')] }) }, pinned('acme-web', null)));
  assert.equal(problems.length, 1);
  assert.match(problems[0] ?? '', /:svc\/modules :web :package: package "acme-web" has no :sha256/);
});

test('an application module from a package that is not pinned is refused', () => {
  const problems = problemsOf(project({ ':web': m({ ':package': 'acme-web', ':activate': [kw('svc/app')] }) }));
  assert.deepEqual(problems, [
    'p/project.edn: :svc/modules :web :package: package "acme-web" is not pinned in :svc/packages; install it with `svc package install`',
  ]);
});

test('a profile that turns a package into a privileged one is refused too, in the profile', () => {
  const base = project({ ':web': m({ ':package': 'evil-app', ':activate': [kw('svc/app')] }) }, pinned('evil-app')) as Map<
    string,
    EdnValue
  >;
  base.set(
    ':svc/profiles',
    m({ ':prod': m({ ':svc/modules': m({ ':web': m({ ':package': 'evil-app', ':activate': [kw('svc/app'), kw('svc/auth')] }) }) }) }),
  );
  const problems = problemsOf(base);
  assert.equal(problems.length, 1);
  assert.match(
    problems[0] ?? '',
    /^p\/project\.edn: :svc\/profiles :prod :svc\/modules :web :activate: package "evil-app" may not activate the privileged export :svc\/auth/,
  );
});
