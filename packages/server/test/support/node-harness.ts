import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AuditShippingHealth, type ProviderHandle, pairingProofString } from '@svc/core';
import type { Store } from '@svc/core/store';
import type { FastifyInstance } from 'fastify';
import { buildNodeApp, type ComponentStatus, createNodeIdentity, type NodeIdentity, type NodeProvider } from '../../src/index.js';
import {
  admin,
  api,
  type DeviceKey,
  type Harness,
  type HarnessOptions,
  listenOrReady,
  newDeviceKey,
  type Reply,
  startHarness,
} from './harness.js';

/** What the composition root reports in these tests. */
export const TEST_COMPONENTS: ComponentStatus = Object.freeze({
  service: { name: 'svc', version: '0.1.0-test' },
  store_addon: {
    package: 'svc-store-sqlite',
    version: '0.1.0',
    sha256: 'ab'.repeat(32),
    verified: true,
    detail: 'archive contents, operation set, crate name and ABI verified',
  },
  modules: [
    { alias: 'auth', module: 'svc/auth', package: null, activate: [] },
    { alias: 'store', module: null, package: 'svc-store-sqlite', activate: ['svc/store'] },
  ],
});

/** The management API and the node surface on 127.0.0.1 (or, with `socket: false`, injected), sharing one real SQLite store and one fake clock. */
export interface NodeHarness extends Harness {
  readonly node: FastifyInstance;
  readonly nodeBase: string;
  readonly identity: NodeIdentity;
}

export interface NodeHarnessOptions extends HarnessOptions {
  components?: () => ComponentStatus;
  providers?: readonly NodeProvider[];
  providerPackages?: readonly ProviderHandle[];
  pairingFailureLimit?: { maxFailures?: number; windowSeconds?: number };
  /** Where the node surface binds (default 127.0.0.1); `nodeBase` then uses this host, or `nodeUrlHost`. */
  nodeHost?: string;
  /** The host of `nodeBase` when it differs from `nodeHost` (a wildcard bind reached at one address). */
  nodeUrlHost?: string | undefined;
  /** How audit shipping is doing, as the running service reports it to health. */
  auditShipping?: () => AuditShippingHealth | null;
}

export async function startNodeHarness(opts: NodeHarnessOptions = {}): Promise<NodeHarness> {
  const h = await startHarness(opts);
  const identity = createNodeIdentity(generateKeyPairSync('ed25519').privateKey);
  const node = await buildNodeApp({
    deps: h.deps,
    identity,
    components: opts.components ?? (() => TEST_COMPONENTS),
    ...(opts.providers === undefined ? {} : { providers: opts.providers }),
    ...(opts.providerPackages === undefined ? {} : { providerPackages: opts.providerPackages }),
    ...(opts.pairingFailureLimit === undefined ? {} : { pairingFailureLimit: opts.pairingFailureLimit }),
    ...(opts.auditShipping === undefined ? {} : { auditShipping: opts.auditShipping }),
    healthCheckTimeoutMs: 1000,
    logger: false,
  });
  const socket = opts.socket ?? true;
  const port = await listenOrReady(node, socket, opts.nodeHost ?? '127.0.0.1');
  const urlHost = opts.nodeUrlHost ?? opts.nodeHost ?? '127.0.0.1';
  const origin = `http://${urlHost.includes(':') ? `[${urlHost}]` : urlHost}`;
  return {
    ...h,
    node,
    nodeBase: socket ? `${origin}:${port}` : origin,
    identity,
    async close() {
      await node.close();
      await h.close();
    },
  };
}

/** A request to the node surface (same helper as the management one, other base URL). */
export function nodeApi(
  h: NodeHarness,
  method: string,
  path: string,
  opts: { body?: unknown; token?: string; headers?: Record<string, string>; rawBody?: string } = {},
): Promise<Reply> {
  return api({ base: h.nodeBase, app: h.node, injected: h.injected }, method, path, opts);
}

/** A signed-in management admin's access token. */
export async function adminToken(h: NodeHarness): Promise<string> {
  return (await admin(h)).pair.access_token;
}

/** Prepares an intent over HTTP and returns the 201 body. */
// biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
export async function prepare(h: NodeHarness, token: string, body: Record<string, unknown> = { realm: 'management' }): Promise<any> {
  // The new device's key is pinned at prepare: a fresh one unless the body names one.
  const key = body.public_key === undefined ? newDeviceKey() : undefined;
  const sent = key === undefined ? body : { ...body, public_key: key.publicKeyHex };
  const r = await nodeApi(h, 'POST', '/edge/0-alpha/pairing/prepare', { token, body: sent });
  if (r.status !== 201) throw new Error(`prepare failed: ${r.text}`);
  return { ...r.body, key };
}

/** The body a new device sends to complete an intent: its proof of possession over this node's id. */
export function completion(
  h: NodeHarness,
  intent: { intent_id: string; code: string },
  key: DeviceKey,
  opts: { nodeId?: string; signer?: DeviceKey; code?: string; name?: string } = {},
): Record<string, string> {
  const proof = pairingProofString({ nodeId: opts.nodeId ?? h.identity.nodeId, intentId: intent.intent_id, publicKey: key.publicKeyHex });
  return {
    intent_id: intent.intent_id,
    code: opts.code ?? intent.code,
    public_key: key.publicKeyHex,
    signature: (opts.signer ?? key).signHex(proof),
    ...(opts.name === undefined ? {} : { name: opts.name }),
  };
}

/** A store whose ping can be broken, for degraded health. */
export function breakablePing(store: Store): { store: Store; setBroken(broken: boolean): void } {
  let broken = false;
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'ping') return () => (broken ? Promise.reject(new Error('store unreachable')) : target.ping());
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    store: wrapped,
    setBroken(b) {
      broken = b;
    },
  };
}

/** A scratch directory for files handed to openssl. */
export function scratch(): { dir: string; write(name: string, data: string | Buffer): string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'svc-node-openssl-'));
  return {
    dir,
    write(name, data) {
      const path = join(dir, name);
      writeFileSync(path, data);
      return path;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
