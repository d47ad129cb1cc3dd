import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProviderContext, ProviderHandle, ProviderJson, ProviderPolicy, Realm } from '@svc/core';
import { type ProviderHostLog, type ProviderHostOptions, startProviderHost } from '@svc/provider-host';
import { openSqliteStore } from 'svc-store-sqlite';

/** The directory of a fixture provider package. */
export const fixtureDir = (name: string): string => new URL(`../fixtures/${name}`, import.meta.url).pathname;

export const ISSUER = 'https://idp.test';

export const policyOf = (over: Partial<ProviderPolicy> = {}): ProviderPolicy => ({
  name: 'fixture',
  realms: ['application'],
  allowedIssuers: [ISSUER],
  jit: { enabled: false, emailDomains: [] },
  ...over,
});

export const ctxOf = (realm: Realm = 'application', intent: ProviderContext['intent'] = 'signin'): ProviderContext => ({
  realm,
  intent,
  origin: 'https://app.example.com',
  callbackUrl: 'https://app.example.com/.svc/auth/v1/providers/fixture/callback',
  subject: null,
  existingCredentials: [],
});

export const finishInput = (body: ProviderJson = {}) => ({ state: null, request: { query: {}, body }, credential: null });

/** A log that keeps every line, to assert what was (and was not) logged. */
export function captureLog(): ProviderHostLog & { readonly lines: string[] } {
  const lines: string[] = [];
  const put = (level: string) => (obj: Record<string, unknown>, msg: string) => {
    lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
  };
  return { lines, info: put('info'), warn: put('warn'), error: put('error') };
}

/** Starts the fixture package `name` confined, with `config`; the caller closes it. */
export function startFixture(name: string, config: ProviderJson, over: Partial<ProviderHostOptions> = {}): Promise<ProviderHandle> {
  return startProviderHost({
    name: 'fixture',
    packageDir: fixtureDir(name),
    entry: 'index.mjs',
    exportName: 'default',
    dependencyDirs: [],
    config,
    policy: policyOf(),
    packageName: name,
    packageVersion: '1.0.0',
    signer: 'test-publisher',
    callTimeoutMs: 3_000,
    restartDelayMs: 50,
    ...over,
  });
}

/** A temporary project with a real, initialised SQLite control database at `.svc/control/control.db`. */
export interface ControlProject {
  readonly dir: string;
  readonly controlDb: string;
  remove(): void;
}

export async function createControlProject(): Promise<ControlProject> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-provider-host-'));
  const control = join(dir, '.svc', 'control');
  mkdirSync(control, { recursive: true, mode: 0o700 });
  const controlDb = join(control, 'control.db');
  const store = await openSqliteStore({ file: controlDb });
  await store.initProject({ projectId: 'prj_01KAQ0000000PROVIDERHOST0', createdAt: Date.parse('2026-01-01T00:00:00Z') });
  await store.close();
  return { dir, controlDb, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
