import { createPrivateKey, randomBytes, sign } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createDpopProof, loadDeviceKey } from '@svc/client';
import { parseSessionToken } from '@svc/core';
import pg from 'pg';
// In process: installing a package and reading the audit trail are offline commands (the
// callers spawn the `svc serve` whose behaviour they test).
import { svcOkInProcess as svcOk } from '../in-process.js';

/** The test server: `SVC_TEST_PG_URL`, else the local trust-auth one `scripts/ensure-postgres.sh` starts. */
export const PG_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The addon archives `npm run build` bundles with the runtime. */
export const BUNDLED_ADDONS_DIR = fileURLToPath(new URL('../../../runtime/addons/', import.meta.url));

/** The SHA-256 the build recorded for a bundled addon archive (from `SHA256SUMS`). */
export function bundledSha256(name: string): string {
  const line = readFileSync(join(BUNDLED_ADDONS_DIR, 'SHA256SUMS'), 'utf8')
    .split('\n')
    .find((l) => new RegExp(`^[0-9a-f]{64}  ${name}-[0-9][^/]*\\.tgz$`).test(l.trim()));
  if (line === undefined) throw new Error(`no bundled ${name} archive in ${BUNDLED_ADDONS_DIR}; run npm run build`);
  return line.slice(0, 64);
}

/**
 * PostgreSQL schemas handed out to one test file, each dropped by `dispose()` (call it in
 * `after`), so parallel files and runs never share or leave state.
 */
export function createSchemas() {
  const names = new Set<string>();
  return {
    /** A schema name no other run uses. */
    fresh(): string {
      const name = `svc_t_${randomBytes(6).toString('hex')}`;
      names.add(name);
      return name;
    },
    async dispose(): Promise<void> {
      if (names.size === 0) return;
      const client = new pg.Client({ connectionString: PG_URL });
      await client.connect();
      try {
        for (const name of names) await client.query(`DROP SCHEMA IF EXISTS ${name} CASCADE`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Writes `<root>/project/project.edn` with the control state on PostgreSQL (module `:pg`,
 * schema `schema`), then pins and installs the bundled `svc-store-postgres` archive with
 * `svc package install`. The test server trusts local connections, so the project accepts that
 * (`:store/allow-unauthenticated true`). `storeConfig` and `authConfig` are extra EDN entries for the two
 * `:config` maps. Returns the project directory, ready for `enrolledProject(root)`.
 */
export async function writePostgresProject(
  root: string,
  opts: { schema: string; storeConfig?: string; authConfig?: string; env?: NodeJS.ProcessEnv; url?: string },
): Promise<string> {
  const dir = join(root, 'project');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'project.edn'),
    `{:svc/project "multi"
 :svc/modules {:pg {:package "svc-store-postgres" :activate [:svc/store]
                    :config {:store/url ${JSON.stringify(opts.url ?? PG_URL)} :store/schema ${JSON.stringify(opts.schema)}
                             :store/pool-size 4 :store/allow-unauthenticated true ${opts.storeConfig ?? ''}}}
               :auth {:module :svc/auth :config {:auth/store :pg ${opts.authConfig ?? ''}}}}}
`,
  );
  await svcOk(['package', 'install', 'svc-store-postgres', '--sha256', bundledSha256('svc-store-postgres'), dir], { env: opts.env });
  return dir;
}

/** The contract's TokenPair. */
export interface TokenPair {
  readonly session_id: string;
  readonly realm: string;
  readonly token_type: string;
  readonly access_token: string;
  readonly expires_in: number;
  readonly refresh_token: string;
  readonly refresh_expires_in: number;
}

async function postJson(url: string, body: unknown, bearer?: string, dpop?: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(bearer === undefined ? {} : { authorization: `Bearer ${bearer}` }),
      ...(dpop === undefined ? {} : { dpop }),
    },
    body: JSON.stringify(body),
  });
}

/** The key file each session signed in over HTTP with, by session id: what signs its refresh proofs. */
const sessionKeyFiles = new Map<string, string>();

/**
 * A DPoP proof (RFC 9449) for one request, signed with the key in `keyFile` by the SDK.
 *
 * @example
 * const proof = dpopProofFor(keyFile, 'POST', `${url}/v1/auth/refresh`);
 */
export function dpopProofFor(keyFile: string, htm: string, htu: string): string {
  return createDpopProof(loadDeviceKey(keyFile), { htm, htu });
}

/**
 * Signs in over HTTP as any client would: asks `baseUrl` for a challenge for the key in
 * `keyFile` (as written by `svc auth keygen`), signs its UTF-8 bytes with Ed25519 from
 * node:crypto, and returns the session's token pair.
 */
export async function loginOverHttp(baseUrl: string, keyFile: string, publicKey: string): Promise<TokenPair> {
  const chl = await postJson(`${baseUrl}/v1/auth/challenges`, { public_key: publicKey });
  if (chl.status !== 201) throw new Error(`challenge: ${chl.status} ${await chl.text()}`);
  const { challenge_id, challenge } = (await chl.json()) as { challenge_id: string; challenge: string };
  const signature = sign(null, Buffer.from(challenge, 'utf8'), createPrivateKey(readFileSync(keyFile))).toString('hex');
  const ses = await postJson(`${baseUrl}/v1/auth/sessions`, { challenge_id, signature });
  if (ses.status !== 201) throw new Error(`session: ${ses.status} ${await ses.text()}`);
  const pair = (await ses.json()) as TokenPair;
  sessionKeyFiles.set(pair.session_id, keyFile);
  return pair;
}

/** `GET /v1/auth/me` with `accessToken`. */
export function me(baseUrl: string, accessToken: string): Promise<Response> {
  return fetch(`${baseUrl}/v1/auth/me`, { headers: { authorization: `Bearer ${accessToken}` } });
}

/**
 * `POST /v1/auth/refresh` with `refreshToken` and, as every client of a session bound to its
 * device key does (the default `:auth/sender-constraint :refresh`), a fresh DPoP proof by the key
 * it signed in with through {@link loginOverHttp}. `proof` overrides it (`null`: send none).
 */
export function refresh(baseUrl: string, refreshToken: string, proof?: string | null): Promise<Response> {
  const url = `${baseUrl}/v1/auth/refresh`;
  const sessionId = parseSessionToken(refreshToken, 'refresh')?.sessionId;
  const keyFile = sessionId === undefined ? undefined : sessionKeyFiles.get(sessionId);
  const dpop = proof === undefined ? (keyFile === undefined ? undefined : dpopProofFor(keyFile, 'POST', url)) : (proof ?? undefined);
  return postJson(url, { refresh_token: refreshToken }, undefined, dpop);
}

/** `POST /v1/auth/revoke`: the bearer's own session (logout), or `sessionId` (admin revocation). */
export function revoke(baseUrl: string, accessToken: string, sessionId?: string): Promise<Response> {
  return postJson(`${baseUrl}/v1/auth/revoke`, sessionId === undefined ? {} : { session_id: sessionId }, accessToken);
}

/** `svc auth audit <dir> --json`, parsed: one event per line. */
export async function auditEvents(
  dir: string,
  env?: NodeJS.ProcessEnv,
): Promise<{ type: string; session_id: string | null; data: Record<string, unknown> }[]> {
  const out = (await svcOk(['auth', 'audit', dir, '--json'], { env })).stdout.trim();
  return out === '' ? [] : out.split('\n').map((l) => JSON.parse(l));
}
