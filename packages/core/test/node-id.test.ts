import assert from 'node:assert/strict';
import { createHash, generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { CLUSTER_ID_PATTERN, clusterIdOf, isValidNodeId, nodeIdOf, normalizeNodeId, publicKeyHexOf } from '@svc/core';
import { NODE_ID_PATTERN } from '../src/node-id.js';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
// RFC 8032 §7.1, test 1.
const RFC8032_KEY = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';

function freshKey(): string {
  return publicKeyHexOf(generateKeyPairSync('ed25519').publicKey);
}

/** An independent reading of the format: 160 bits of SHA-256 as 32 base32 symbols, 5 bits each. */
function expectedSymbols(publicKeyHex: string): string {
  const digest = createHash('sha256').update(Buffer.from(publicKeyHex, 'hex')).digest();
  const bits = [...digest.subarray(0, 20)].map((b) => b.toString(2).padStart(8, '0')).join('');
  let out = '';
  for (let i = 0; i < 160; i += 5) out += ALPHABET[Number.parseInt(bits.slice(i, i + 5), 2)];
  return out;
}

test('a node id is the base32 of the first 20 bytes of SHA-256(public key), in 8 groups of 4, plus a check symbol', () => {
  const id = nodeIdOf(RFC8032_KEY);
  assert.match(id, NODE_ID_PATTERN);
  const [data, check] = [id.slice(0, 39).replace(/-/g, ''), id.slice(40)];
  assert.equal(data, expectedSymbols(RFC8032_KEY));
  assert.equal(check.length, 1);
  assert.equal(isValidNodeId(id), true);
});

test('the node id does not depend on the case of the hex key and differs between keys', () => {
  assert.equal(nodeIdOf(RFC8032_KEY.toUpperCase()), nodeIdOf(RFC8032_KEY));
  const ids = new Set(Array.from({ length: 50 }, () => nodeIdOf(freshKey())));
  assert.equal(ids.size, 50);
});

test('every single changed symbol, at every position, is detected', () => {
  for (let k = 0; k < 5; k++) {
    const id = nodeIdOf(k === 0 ? RFC8032_KEY : freshKey());
    let variants = 0;
    for (let i = 0; i < id.length; i++) {
      if (id[i] === '-') continue;
      for (const s of ALPHABET) {
        if (s === id[i]) continue;
        const changed = id.slice(0, i) + s + id.slice(i + 1);
        assert.equal(isValidNodeId(changed), false, `${changed} passed its check`);
        variants++;
      }
    }
    assert.equal(variants, 33 * 31);
  }
});

test('a swap of two neighbouring distinct symbols is detected (except the 0/Z pair of Luhn mod 32)', () => {
  for (let k = 0; k < 20; k++) {
    const id = nodeIdOf(freshKey());
    const symbols = id.replace(/-/g, '');
    for (let i = 0; i + 1 < symbols.length; i++) {
      const a = symbols[i] as string;
      const b = symbols[i + 1] as string;
      if (a === b || (a === '0' && b === 'Z') || (a === 'Z' && b === '0')) continue;
      const swapped = symbols.slice(0, i) + b + a + symbols.slice(i + 2);
      assert.equal(normalizeNodeId(swapped), null, `swap at ${i} of ${id} passed its check`);
    }
  }
});

test('a node id typed by a person normalises to the canonical form: case, spaces, dashes, O/I/L do not matter', () => {
  const id = nodeIdOf(RFC8032_KEY);
  assert.equal(normalizeNodeId(id), id);
  assert.equal(normalizeNodeId(id.toLowerCase()), id);
  assert.equal(normalizeNodeId(` ${id.replace(/-/g, ' ')} `), id);
  assert.equal(normalizeNodeId(id.replace(/-/g, '')), id);
  assert.equal(normalizeNodeId(id.replace(/0/g, 'O').replace(/1/g, 'l')), id);
  assert.equal(isValidNodeId(id.toLowerCase()), false, 'isValidNodeId takes the canonical form only');
});

test('anything that is not a node id is refused', () => {
  const id = nodeIdOf(RFC8032_KEY);
  for (const bad of [id.slice(0, -2), `${id}0`, id.replace(/-/g, ''), id.replace(/-/, '_'), '', `${id.slice(0, -1)}U`]) {
    assert.equal(isValidNodeId(bad), false, bad);
  }
  for (const bad of [id.slice(0, -1), `${id}00`, `${id.slice(0, -1)}U`, 'not a node id']) assert.equal(normalizeNodeId(bad), null, bad);
  for (const bad of [42, null, undefined, {}]) assert.equal(isValidNodeId(bad), false);
  assert.throws(() => nodeIdOf('abc'), TypeError);
  assert.throws(() => nodeIdOf(`${RFC8032_KEY.slice(0, 62)}zz`), TypeError);
});

test('the cluster id is the same for one project id, differs between projects, and is clu_ + 26 Crockford symbols of SHA-256 over a label and the project id', () => {
  const id = clusterIdOf('prj_01M84FYN5X4PDVZ73Z4FT3NFQC');
  assert.equal(clusterIdOf('prj_01M84FYN5X4PDVZ73Z4FT3NFQC'), id, 'every node of the project derives the same one');
  assert.notEqual(clusterIdOf('prj_01M84FYN5X4PDVZ73Z4FT3NFQD'), id);
  assert.match(id, CLUSTER_ID_PATTERN);
  // Independently: the first 16 bytes of the digest, as 26 base32 symbols (130 bits, the top two zero).
  const digest = createHash('sha256').update('svc-cluster\0prj_01M84FYN5X4PDVZ73Z4FT3NFQC').digest().subarray(0, 16);
  let value = BigInt(`0x${digest.toString('hex')}`);
  let symbols = '';
  for (let i = 0; i < 26; i++) {
    symbols = ALPHABET[Number(value & 31n)] + symbols;
    value >>= 5n;
  }
  assert.equal(id, `clu_${symbols}`);
  assert.throws(() => clusterIdOf(''), TypeError);
});
