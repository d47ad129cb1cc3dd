import {
  type CompleteBody,
  type DeviceJson,
  isValidNodeId,
  type NodeDiscoveryJson,
  type NodeHealthJson,
  type NodeKeySetJson,
  type NodeStatusJson,
  nodeIdOf,
  nodeKeyValidAt,
  normalizeNodeId,
  type PairedDeviceJson,
  type PrepareBody,
  type PreparedPairingJson,
  pairingProofString,
  type Realm,
  rfc8785Json,
  type SignedDiagnosticsJson,
  verifyEd25519,
} from '@svc/core';
import { ApiError, ApiUnreachableError, problemFromResponse } from './api-error.js';
import { assertMayCarryBearer } from './bearer-transport.js';
import type { DeviceKey } from './device-key.js';
import { createDpopProof } from './dpop-proof.js';
import type { ClientFailureCode } from './failure-codes.js';

// The answers' types are derived from the schemas the node serializes them with (core's wire
// shapes): one declaration, so the SDK cannot miss a field the server sends.
export type {
  NodeDiscoveryJson,
  NodeHealthJson,
  NodeRouteJson,
  NodeStatusJson,
  PairedDeviceJson,
  PreparedPairingJson,
  SignedDiagnosticsJson,
} from '@svc/core';

/** Typed calls to the node HTTP surface. */
export interface NodeClient {
  /** The base URL, without a trailing slash. */
  readonly baseUrl: string;
  discovery(): Promise<NodeDiscoveryJson>;
  /** Resolves with the report when healthy (200) and when degraded (503). */
  health(): Promise<NodeHealthJson>;
  status(accessToken: string): Promise<NodeStatusJson>;
  diagnostics(accessToken: string, nonce: string): Promise<SignedDiagnosticsJson>;
  preparePairing(accessToken: string, input: PrepareBody & { readonly realm: Realm }): Promise<PreparedPairingJson>;
  completePairing(input: CompleteBody): Promise<PairedDeviceJson>;
}

/** Options of {@link createNodeClient}. */
export interface NodeClientOptions {
  /** E.g. `http://127.0.0.1:9091`. */
  readonly baseUrl: string;
  /** A `fetch` to use instead of the global one (tests, proxies). */
  readonly fetch?: typeof fetch;
  /** As for the management client: the device key that signs DPoP proofs for bound access tokens. */
  readonly dpopKey?: DeviceKey | (() => DeviceKey | null | undefined);
  /** Whether an access token is DPoP-bound (sent as `Authorization: DPoP` with a proof). */
  readonly isBoundToken?: (accessToken: string) => boolean;
}

/** The node surface could not be reached at all (connection refused, DNS, reset). */
export class NodeUnreachableError extends ApiUnreachableError {
  constructor(url: string, cause: unknown) {
    super(url, cause, 'node_unreachable');
    this.name = 'NodeUnreachableError';
    this.message = `cannot reach the node surface at ${url}`;
  }
}

/** The node's answer does not hold together (e.g. an id that is not derived from its key). */
export class NodeIdentityError extends Error {
  readonly code = 'node_identity_mismatch' as const satisfies ClientFailureCode;
  constructor(message: string) {
    super(message);
    this.name = 'NodeIdentityError';
  }
}

/**
 * Creates a client of the node HTTP surface. Every non-2xx answer throws an {@link ApiError}
 * carrying the problem's `code` (except a degraded health report, which resolves); a
 * connection failure throws a {@link NodeUnreachableError}. The calls that carry a management
 * token (status, diagnostics, preparePairing) throw an `InsecureBearerUrlError` before
 * connecting when `baseUrl` is `http://` to a non-loopback host.
 *
 * @example
 * const node = createNodeClient({ baseUrl: 'http://127.0.0.1:9091' });
 * const { node_id } = await node.discovery();
 */
export function createNodeClient(options: NodeClientOptions): NodeClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const doFetch = options.fetch ?? globalThis.fetch;

  async function call<T>(
    method: string,
    path: string,
    init: { body?: unknown; bearer?: string; okStatuses?: readonly number[] } = {},
  ): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.bearer !== undefined) {
      // Checked per request, before any connection: a management token never leaves this
      // machine in clear text (a fake listener on the network would capture it).
      assertMayCarryBearer(baseUrl);
      const key =
        options.isBoundToken?.(init.bearer) === true
          ? ((typeof options.dpopKey === 'function' ? options.dpopKey() : options.dpopKey) ?? undefined)
          : undefined;
      if (key === undefined) headers.authorization = `Bearer ${init.bearer}`;
      else {
        headers.authorization = `DPoP ${init.bearer}`;
        headers.dpop = createDpopProof(key, { htm: method, htu: `${baseUrl}${path}`, accessToken: init.bearer });
      }
    }
    let res: Response;
    let text: string;
    try {
      res = await doFetch(`${baseUrl}${path}`, {
        method,
        headers,
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      });
      text = await res.text();
    } catch (cause) {
      throw new NodeUnreachableError(baseUrl, cause);
    }
    if (!res.ok && !(init.okStatuses ?? []).includes(res.status)) throw problemFromResponse(res, text);
    return JSON.parse(text) as T;
  }

  return Object.freeze({
    baseUrl,
    discovery: () => call<NodeDiscoveryJson>('GET', '/.well-known/edge'),
    health: () => call<NodeHealthJson>('GET', '/edge/0-alpha/health', { okStatuses: [503] }),
    status: (accessToken) => call<NodeStatusJson>('GET', '/edge/0-alpha/status', { bearer: accessToken }),
    diagnostics: (accessToken, nonce) =>
      call<SignedDiagnosticsJson>('POST', '/edge/0-alpha/diagnostics', { bearer: accessToken, body: { nonce } }),
    preparePairing: (accessToken, input) =>
      call<PreparedPairingJson>('POST', '/edge/0-alpha/pairing/prepare', { bearer: accessToken, body: input }),
    completePairing: (input) => call<PairedDeviceJson>('POST', '/edge/0-alpha/pairing/complete', { body: input }),
  } satisfies NodeClient);
}

/**
 * The node's id from its discovery document, after checking that it holds together: the id's
 * check symbol is right AND the id is the one derived from the advertised public key. With
 * `expectedNodeId` (as the admin read it out, typed loosely), also that it is that node.
 *
 * @throws {NodeIdentityError} when any check fails; {@link TypeError} when `expectedNodeId` is not a node id.
 * @example
 * const nodeId = checkedNodeId(await node.discovery(), '7K2M-...');
 */
export function checkedNodeId(discovery: NodeDiscoveryJson, expectedNodeId?: string): string {
  let expected: string | null = null;
  if (expectedNodeId !== undefined) {
    expected = normalizeNodeId(expectedNodeId);
    if (expected === null) throw new TypeError(`${JSON.stringify(expectedNodeId)} is not a node id (its check symbol does not match)`);
  }
  const id = discovery.node_id;
  if (!isValidNodeId(id))
    throw new NodeIdentityError(`the node answered with the id ${JSON.stringify(id)}, whose check symbol does not match`);
  if (
    typeof discovery.public_key !== 'string' ||
    !/^[0-9a-fA-F]{64}$/.test(discovery.public_key) ||
    nodeIdOf(discovery.public_key) !== id
  ) {
    throw new NodeIdentityError(`the node's id ${id} is not derived from the public key it advertises`);
  }
  if (expected !== null && expected !== id) {
    throw new NodeIdentityError(`the node at this URL is ${id}, not the expected ${expected}: is it the right node?`);
  }
  return id;
}

/**
 * Pairs a new device: reads the node's discovery document (and checks its id, see
 * {@link checkedNodeId}), signs the proof of possession
 * `pairingProofString({nodeId, intentId, publicKey})` with the device key, and completes the
 * intent with the one-time code.
 *
 * @example
 * const { device } = await pairDevice(createNodeClient({ baseUrl }), loadDeviceKey('device.pem'), {
 *   intentId: 'int_...', code: 'ABCD-EFGH', expectedNodeId: '7K2M-...',
 * });
 */
export async function pairDevice(
  node: NodeClient,
  key: DeviceKey,
  input: { readonly intentId: string; readonly code: string; readonly name?: string; readonly expectedNodeId?: string },
): Promise<{ readonly device: DeviceJson; readonly nodeId: string; readonly preparedByNode: string | null; readonly clusterId: string }> {
  const nodeId = checkedNodeId(await node.discovery(), input.expectedNodeId);
  const signature = key.sign(pairingProofString({ nodeId, intentId: input.intentId, publicKey: key.publicKeyHex }));
  const answer = await node.completePairing({
    intent_id: input.intentId,
    code: input.code,
    public_key: key.publicKeyHex,
    signature,
    ...(input.name === undefined ? {} : { name: input.name }),
  });
  // The signature is over this node's id, so only this node can have completed it.
  if (answer.completed_by_node !== nodeId) {
    throw new NodeIdentityError(`the pairing was answered by node ${answer.completed_by_node}, not ${nodeId} whose id the device signed`);
  }
  return { device: answer.device, nodeId, preparedByNode: answer.prepared_by_node, clusterId: answer.cluster_id };
}

/**
 * Checks signed diagnostics as any third party can: the Ed25519 signature over the RFC 8785
 * canonical JSON of the payload, by the key whose id is `node_id`, echoing `nonce`. With
 * `publicKeyHex` (e.g. pinned from an earlier discovery), also that it is that key. With `keys`
 * (the node's discovery document, or the same fields kept from it), also that it is the node's
 * current key, or one of its previous keys and generated inside that key's window: a report
 * kept from before a key rotation still verifies, one a retired key signed after its
 * retirement does not.
 *
 * @example
 * const signed = await node.diagnostics(token, nonce);
 * if (!verifyDiagnostics(signed, { nonce, keys: await node.discovery() })) throw new Error('forged diagnostics');
 */
export function verifyDiagnostics(
  signed: SignedDiagnosticsJson,
  expect: { readonly nonce: string; readonly publicKeyHex?: string; readonly keys?: NodeKeySetJson },
): boolean {
  if (signed.alg !== 'Ed25519' || signed.canonicalization !== 'RFC8785') return false;
  if (!/^[0-9a-fA-F]{64}$/.test(signed.public_key) || !/^[0-9a-fA-F]{128}$/.test(signed.signature)) return false;
  if (expect.publicKeyHex !== undefined && expect.publicKeyHex.toLowerCase() !== signed.public_key.toLowerCase()) return false;
  if (expect.keys !== undefined && !nodeKeyValidAt(expect.keys, signed.public_key, String(signed.payload.generated_at))) return false;
  if (signed.payload.nonce !== expect.nonce) return false;
  if (nodeIdOf(signed.public_key) !== signed.node_id || signed.payload.node_id !== signed.node_id) return false;
  let canonical: string;
  try {
    canonical = rfc8785Json(signed.payload);
  } catch {
    return false;
  }
  return verifyEd25519(signed.public_key, Buffer.from(canonical, 'utf8'), Buffer.from(signed.signature, 'hex'));
}
