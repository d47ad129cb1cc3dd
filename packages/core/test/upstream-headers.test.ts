import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectionNamedHeaders, relaysRequestHeader, relaysResponseHeader, upstreamHeaderName } from '@svc/core';
import { HOP_BY_HOP_HEADERS } from '../src/upstream-headers.js';

const none = new Set<string>();

test('header names are compared lower-cased with every separator read as -', () => {
  assert.equal(upstreamHeaderName('X_Forwarded.For'), 'x-forwarded-for');
  assert.equal(upstreamHeaderName('Keep-Alive'), 'keep-alive');
});

test('a Connection header names its headers, in any case and spacing, over several lines', () => {
  assert.deepEqual([...connectionNamedHeaders(' keep-alive ,X_Private,, Upgrade ')], ['keep-alive', 'x-private', 'upgrade']);
  assert.deepEqual([...connectionNamedHeaders(['close', 'x-a, x-b'])], ['close', 'x-a', 'x-b']);
  assert.equal(connectionNamedHeaders(undefined).size, 0);
});

test('hop-by-hop headers of RFC 9110 7.6.1 are relayed in neither direction, in any spelling', () => {
  for (const name of HOP_BY_HOP_HEADERS) {
    for (const spelled of [name, name.toUpperCase(), name.replaceAll('-', '_')]) {
      assert.equal(relaysRequestHeader(spelled, none, none), false, spelled);
      assert.equal(relaysResponseHeader(spelled, none), false, spelled);
    }
  }
});

test('a header the Connection header names is relayed in neither direction', () => {
  const named = connectionNamedHeaders('x-private');
  assert.equal(relaysRequestHeader('X-Private', named, none), false);
  assert.equal(relaysRequestHeader('x_private', named, none), false);
  assert.equal(relaysResponseHeader('X-PRIVATE', named), false);
  assert.equal(relaysRequestHeader('x-public', named, none), true);
});

test('forwarding claims and Expect are never relayed as the caller sent them', () => {
  for (const name of [
    'X-Forwarded-For',
    'x_forwarded_for',
    'X-Forwarded-Host',
    'X-Forwarded-Proto',
    'X-Forwarded-Port',
    'Forwarded',
    'X-Real-IP',
    'Expect',
  ]) {
    assert.equal(relaysRequestHeader(name, none, none), false, name);
  }
});

test('a caller header of the name of an identity header the gateway sets is not relayed, whatever its spelling', () => {
  const identity = new Set(['svc-subject', 'svc-assertion']);
  for (const name of ['Svc-Subject', 'SVC_SUBJECT', 'svc.assertion']) assert.equal(relaysRequestHeader(name, none, identity), false, name);
});

test('end-to-end headers are relayed both ways', () => {
  for (const name of ['accept', 'content-type', 'content-length', 'cookie', 'authorization', 'x-app']) {
    assert.equal(relaysRequestHeader(name, none, none), true, name);
  }
  for (const name of ['content-type', 'content-length', 'set-cookie', 'location', 'www-authenticate']) {
    assert.equal(relaysResponseHeader(name, none), true, name);
  }
});
