import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createManagementClient, createNodeClient, InsecureBearerUrlError, mayCarryBearer } from '../src/index.js';

describe('management tokens never travel in clear text off this machine', () => {
  test('plain http:// carries a bearer only to loopback; https:// anywhere; look-alike hosts are refused', () => {
    for (const url of [
      'http://127.0.0.1:9091',
      'http://127.1:9091',
      'http://localhost:9091',
      'http://[::1]:9091',
      'https://node.example',
    ]) {
      assert.equal(mayCarryBearer(url), true, url);
    }
    for (const url of [
      'http://192.0.2.7:9091',
      'http://node.example:9091',
      'http://127.0.0.1.evil.example',
      'http://localhost.evil.example',
      'http://[::ffff:c000:207]',
      'http://0.0.0.0:9091',
      'ftp://127.0.0.1',
      'not a url',
    ]) {
      assert.equal(mayCarryBearer(url), false, url);
    }
  });

  test('a node client pointed at a non-loopback http:// URL refuses before fetching: the bearer never reaches the wire', async () => {
    let fetched = 0;
    const fetchSpy: typeof fetch = async () => {
      fetched++;
      return new Response('{}', { status: 201 });
    };
    const node = createNodeClient({ baseUrl: 'http://192.0.2.7:9091', fetch: fetchSpy });
    for (const call of [
      () => node.preparePairing('svca_x', { realm: 'management', public_key: 'ab'.repeat(32) }),
      () => node.status('svca_x'),
      () => node.diagnostics('svca_x', 'nonce-0123'),
    ]) {
      await assert.rejects(call(), (e: unknown) => e instanceof InsecureBearerUrlError && e.code === 'insecure_bearer_url');
    }
    const api = createManagementClient({ baseUrl: 'http://192.0.2.7:9090', fetch: fetchSpy });
    await assert.rejects(api.me('svca_x'), InsecureBearerUrlError);
    await assert.rejects(api.refresh('svcr_x'), InsecureBearerUrlError);
    assert.equal(fetched, 0);
  });
});
