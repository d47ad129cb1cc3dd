// `svc serve` with all three listeners on free loopback ports, and the plain HTTP calls and
// Ed25519 signatures the end-to-end tests make against it, as any client would.
import { createPrivateKey, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type StartedProcess, startUntilReady, svcOk } from '../helpers.js';

/** The three listeners' addresses, as `svc serve` printed them. */
export type ServedUrls = { management: string; node: string; app: string };

const READY = {
  management: /svc auth: management API listening on (http:\/\/\S+)\n/,
  node: /svc node: node surface listening on (http:\/\/\S+)\n/,
  app: /svc app: application gateway listening on (http:\/\/\S+)\n/,
};

/**
 * `svc serve` of `dir` with every listener on a free loopback port (the gateway on `appListen`
 * when given: a fixed origin, as passkeys need), until all three are ready.
 *
 * @example
 * const served = await serveAll(dir, cleanEnv());
 */
export function serveAll(dir: string, env: NodeJS.ProcessEnv, opts: { appListen?: string } = {}): Promise<StartedProcess<ServedUrls>> {
  return startUntilReady(
    ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', opts.appListen ?? '127.0.0.1:0', dir],
    (out) => {
      const [m, n, a] = [READY.management.exec(out), READY.node.exec(out), READY.app.exec(out)];
      return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
    },
    { env },
  );
}

/**
 * A JSON call over real HTTP, with a bearer token when given: its status and parsed body.
 *
 * @example
 * const r = await callJson(`${urls.management}/v1/auth/users`, 'GET', token);
 */
// biome-ignore lint/suspicious/noExplicitAny: API JSON is inspected field by field by the tests
export async function callJson(url: string, method: string, token?: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: {
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : JSON.parse(text) };
}

/**
 * The hex Ed25519 signature of `message` (its UTF-8 bytes) by the PEM key in `keyFile`.
 *
 * @example
 * const signature = signWith(keyFile, challenge.challenge);
 */
export function signWith(keyFile: string, message: string): string {
  return sign(null, Buffer.from(message, 'utf8'), createPrivateKey(readFileSync(keyFile))).toString('hex');
}

/** What `svc auth pair complete --json` prints. */
export interface PairedJson {
  readonly device: {
    readonly id: string;
    readonly subject: string;
    readonly realm: string;
    readonly public_key: string;
    readonly name: string;
  };
  readonly prepared_by_node: string | null;
  readonly completed_by_node: string;
  readonly cluster_id: string;
}

/**
 * `svc auth pair complete --json` as the new device runs it against a node surface: its parsed
 * answer (`device`, `prepared_by_node`, `completed_by_node`, `cluster_id`).
 *
 * @example
 * const paired = await pairComplete({ nodeUrl: served.ready.node, nodeId, prepared, keyFile, env });
 */
export async function pairComplete(opts: {
  readonly nodeUrl: string;
  readonly nodeId: string;
  readonly prepared: { readonly intent_id: string; readonly code: string };
  readonly keyFile: string;
  readonly env: NodeJS.ProcessEnv;
}): Promise<PairedJson> {
  const args = ['auth', 'pair', 'complete', '--node-url', opts.nodeUrl, '--node-id', opts.nodeId, '--intent', opts.prepared.intent_id];
  const { stdout } = await svcOk([...args, '--code', opts.prepared.code, '--key', opts.keyFile, '--json'], { env: opts.env });
  return JSON.parse(stdout) as PairedJson;
}
