import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { browserCookieNames, canonicalOrigin, csrfRefusal, isBrowserSessionCookie, safeReturnPath } from '@svc/core';

const GATEWAY = 'https://app.example.com';

describe('csrfRefusal', () => {
  test('safe methods pass whatever their origin; an upgrade does not (cross-site websocket hijacking)', () => {
    for (const method of ['GET', 'HEAD', 'OPTIONS', 'get']) {
      assert.equal(csrfRefusal({ method, origin: 'https://evil.example', secFetchSite: 'cross-site', gatewayOrigin: GATEWAY }), null);
    }
    assert.notEqual(
      csrfRefusal({ method: 'GET', origin: 'https://evil.example', secFetchSite: undefined, gatewayOrigin: GATEWAY, upgrade: true }),
      null,
    );
    assert.equal(csrfRefusal({ method: 'GET', origin: GATEWAY, secFetchSite: undefined, gatewayOrigin: GATEWAY, upgrade: true }), null);
  });

  test('cross-site form POST refused; a same-site origin on another port or subdomain refused; the opaque origin refused', () => {
    for (const origin of [
      'https://evil.example',
      'https://app.example.com:8443',
      'https://www.app.example.com',
      'http://app.example.com',
      'null',
      '',
    ]) {
      assert.notEqual(csrfRefusal({ method: 'POST', origin, secFetchSite: 'same-origin', gatewayOrigin: GATEWAY }), null, origin);
    }
  });

  test('missing Origin: Sec-Fetch-Site same-origin or none passes; cross-site, same-site or nothing at all is refused', () => {
    for (const site of ['same-origin', 'none', 'Same-Origin']) {
      assert.equal(csrfRefusal({ method: 'DELETE', origin: undefined, secFetchSite: site, gatewayOrigin: GATEWAY }), null, site);
    }
    for (const site of ['cross-site', 'same-site', undefined, '']) {
      assert.notEqual(csrfRefusal({ method: 'PUT', origin: undefined, secFetchSite: site, gatewayOrigin: GATEWAY }), null, String(site));
    }
  });

  test('same-origin POST passes, whatever the spelling of the default port or the case', () => {
    for (const origin of [GATEWAY, 'https://APP.example.com', 'https://app.example.com:443']) {
      assert.equal(csrfRefusal({ method: 'POST', origin, secFetchSite: 'cross-site', gatewayOrigin: GATEWAY }), null, origin);
    }
  });
});

test('canonicalOrigin: one spelling, and nothing that is not an http(s) origin', () => {
  assert.equal(canonicalOrigin('HTTP://LocalHost:80'), 'http://localhost');
  assert.equal(canonicalOrigin('http://127.0.0.1:8080'), 'http://127.0.0.1:8080');
  assert.equal(canonicalOrigin('https://[::1]:443'), 'https://[::1]');
  for (const bad of ['null', 'https://a.example/path', 'https://user@a.example', 'ftp://a.example', 'https://a.example:99999', '']) {
    assert.equal(canonicalOrigin(bad), null, bad);
  }
});

test('safeReturnPath: only relative paths of this origin, never //host or /\\host, never back into /.svc/ but the account page', () => {
  for (const ok of ['/', '/app/orders?id=7', '/a#b', '/svc/x', '/.svcx', '/.svc/account', '/.svc/account?done=added']) {
    assert.equal(safeReturnPath(ok), ok);
  }
  for (const bad of [
    '//evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    'https://evil.example/',
    'javascript:alert(1)',
    'app/x',
    '/a\\b',
    '/a b',
    '/a\nLocation: x',
    '/.svc/auth/v1/login',
    '/.svc/account/sessions/revoke-others',
    '/.svc/accounts',
    '/.svc',
    '',
    `/${'a'.repeat(3000)}`,
    42,
    undefined,
  ]) {
    assert.equal(safeReturnPath(bad), null, String(bad));
  }
});

test('cookie names: __Host- with Secure over TLS, prefix-less without Secure over plain HTTP; both sets are ours', () => {
  assert.deepEqual(browserCookieNames(true), {
    access: '__Host-svc-access',
    refresh: '__Host-svc-refresh',
    flow: '__Host-svc-flow',
    sso: '__Host-svc-sso',
    secure: true,
  });
  assert.deepEqual(browserCookieNames(false), {
    access: 'svc-access',
    refresh: 'svc-refresh',
    flow: 'svc-flow',
    sso: 'svc-sso',
    secure: false,
  });
  for (const name of ['svc-access', '__Host-svc-refresh', 'SVC-FLOW', ' svc-access', 'svc-sso', '__Host-svc-sso'])
    assert.ok(isBrowserSessionCookie(name), name);
  for (const name of ['svc', 'session', 'svc-accessx']) assert.ok(!isBrowserSessionCookie(name), name);
});
