import { createHash } from 'node:crypto';
import { crockfordBase32 } from './ids.js';

/**
 * The node id: a name for a node's Ed25519 identity key that a person can read out and compare
 * by eye. It is the Crockford base32 form of the first 20 bytes (160 bits) of
 * SHA-256(raw 32-byte public key), 32 symbols in 8 groups of 4, followed by one check symbol
 * (Luhn mod 32 over the 32 symbols) as a ninth group:
 *
 * `XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-C`
 *
 * The check symbol uses the same alphabet (no `*~$=` that a shell would trip over), catches
 * every single mistyped symbol and every swap of two neighbouring symbols but `0`↔`Z`.
 */

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const N = ALPHABET.length;
const HEX_64 = /^[0-9a-fA-F]{64}$/;
const DATA_SYMBOLS = 32;

/** The canonical form: 8 groups of 4 Crockford base32 symbols, then the check symbol. */
export const NODE_ID_PATTERN = /^(?:[0-9A-HJKMNP-TV-Z]{4}-){8}[0-9A-HJKMNP-TV-Z]$/;

/** Luhn mod N: walking from the right, every second symbol value is doubled and folded. */
function checkSymbol(symbols: string): string {
  let sum = 0;
  let double = true;
  for (let i = symbols.length - 1; i >= 0; i--) {
    let v = ALPHABET.indexOf(symbols[i] as string);
    if (double) {
      v *= 2;
      v = Math.floor(v / N) + (v % N);
    }
    sum += v;
    double = !double;
  }
  return ALPHABET[(N - (sum % N)) % N] as string;
}

function group(symbols: string): string {
  return symbols.match(/.{1,4}/g)?.join('-') ?? '';
}

/**
 * The node id of an Ed25519 public key given as 64 hex digits (either case).
 *
 * @throws {TypeError} when the key is not 64 hex digits.
 * @example
 * nodeIdOf('d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a');
 * // "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-C" (8 groups of 4 and a check symbol)
 */
export function nodeIdOf(publicKeyHex: string): string {
  if (!HEX_64.test(publicKeyHex)) throw new TypeError('nodeIdOf takes an Ed25519 public key as 64 hex digits');
  const digest = createHash('sha256').update(Buffer.from(publicKeyHex, 'hex')).digest();
  const symbols = crockfordBase32(digest.subarray(0, 20), DATA_SYMBOLS);
  return `${group(symbols)}-${checkSymbol(symbols)}`;
}

/**
 * Whether `value` is a node id in canonical form (upper case, dashes where they belong) whose
 * check symbol matches. A single changed symbol always fails.
 *
 * @example
 * isValidNodeId(nodeIdOf(publicKeyHex)); // true
 * isValidNodeId('0000-0000-0000-0000-0000-0000-0000-0000-1'); // false: wrong check symbol
 */
export function isValidNodeId(value: unknown): value is string {
  if (typeof value !== 'string' || !NODE_ID_PATTERN.test(value)) return false;
  const symbols = value.replace(/-/g, '');
  return checkSymbol(symbols.slice(0, DATA_SYMBOLS)) === symbols.slice(DATA_SYMBOLS);
}

/**
 * A node id as a person typed it, in canonical form: case, spaces and dashes do not matter, and
 * `O`, `I`, `L` read as `0`, `1`, `1` (Crockford). Null when it is not 33 symbols or its check
 * symbol does not match.
 *
 * @example
 * normalizeNodeId(' abcd efgh ... '); // canonical "ABCD-EFGH-...", or null
 */
export function normalizeNodeId(text: string): string | null {
  const symbols = text.toUpperCase().replace(/[\s-]/g, '').replace(/O/g, '0').replace(/[IL]/g, '1');
  if (symbols.length !== DATA_SYMBOLS + 1 || /[^0-9A-HJKMNP-TV-Z]/.test(symbols)) return null;
  const canonical = `${group(symbols.slice(0, DATA_SYMBOLS))}-${symbols.slice(DATA_SYMBOLS)}`;
  return isValidNodeId(canonical) ? canonical : null;
}

/** The canonical form of a cluster id: `clu_` and 26 Crockford base32 symbols, like every svc id. */
export const CLUSTER_ID_PATTERN = /^clu_[0-9A-HJKMNP-TV-Z]{26}$/;

/**
 * The cluster id: one stable name for every node serving one project on one store. The nodes
 * share nothing else that is stable (each keeps its own node key), but they all serve the same
 * project id, so the id is derived from it: `clu_` and the Crockford base32 form of
 * the first 16 bytes (128 bits) of SHA-256(`"svc-cluster\0" + projectId`). It names the project's
 * cluster, never a node; it reveals nothing a caller could not already ask for (the project id is
 * in the signed diagnostics).
 *
 * @throws {TypeError} when the project id is empty.
 * @example
 * clusterIdOf('prj_01j...'); // "clu_" and 26 symbols, the same on every node of that project
 */
export function clusterIdOf(projectId: string): string {
  if (typeof projectId !== 'string' || projectId.length === 0) throw new TypeError('clusterIdOf takes a non-empty project id');
  const digest = createHash('sha256').update(`svc-cluster\0${projectId}`, 'utf8').digest();
  return `clu_${crockfordBase32(digest.subarray(0, 16), 26)}`;
}
