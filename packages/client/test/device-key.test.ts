import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { verifyEd25519 } from '@svc/core';
import { generateDeviceKey, loadDeviceKey } from '../src/index.js';

describe('device keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-client-key-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a key made by openssl genpkey loads, from a path and from PEM text, with the public key openssl reports', () => {
    const pem = join(dir, 'openssl.pem');
    execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pem]);
    const der = execFileSync('openssl', ['pkey', '-in', pem, '-pubout', '-outform', 'DER']);
    const expected = der.subarray(der.length - 32).toString('hex');
    assert.equal(loadDeviceKey(pem).publicKeyHex, expected);
    assert.equal(loadDeviceKey(readFileSync(pem, 'utf8')).publicKeyHex, expected);
  });

  test('its signature over the exact UTF-8 string is the one openssl pkeyutl -rawin makes, and verifies', () => {
    const pem = join(dir, 'sign.pem');
    execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pem]);
    const message = 'svc-auth-v1 challenge prj_X management chl_Y 00ff 1795000000';
    writeFileSync(join(dir, 'msg.txt'), message);
    const fromOpenssl = execFileSync('openssl', ['pkeyutl', '-sign', '-rawin', '-inkey', pem, '-in', join(dir, 'msg.txt')]).toString('hex');
    const key = loadDeviceKey(pem);
    const sig = key.sign(message);
    assert.match(sig, /^[0-9a-f]{128}$/);
    // Ed25519 is deterministic: the same key and message give the same signature.
    assert.equal(sig, fromOpenssl);
    assert.equal(verifyEd25519(key.publicKeyHex, Buffer.from(message, 'utf8'), Buffer.from(sig, 'hex')), true);
    assert.equal(verifyEd25519(key.publicKeyHex, Buffer.from(`${message} `, 'utf8'), Buffer.from(sig, 'hex')), false);
  });

  test('a generated key round-trips through its PKCS#8 PEM', () => {
    const { pem, key } = generateDeviceKey();
    assert.match(pem, /^-----BEGIN PRIVATE KEY-----/);
    assert.equal(loadDeviceKey(pem).publicKeyHex, key.publicKeyHex);
  });

  test('a key that is not Ed25519, or not a key, is refused with a TypeError', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    assert.throws(() => loadDeviceKey(rsa), TypeError);
    assert.throws(() => loadDeviceKey('-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n'), TypeError);
    assert.throws(() => loadDeviceKey(join(dir, 'missing.pem')), { code: 'ENOENT' });
  });
});
