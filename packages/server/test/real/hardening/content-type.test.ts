import assert from 'node:assert/strict';
import { test } from 'node:test';
import { againstEverySurface, type Outcome, outcomeOf, send } from './surfaces.js';

function assertOneOf(actual: Outcome, expected: readonly Outcome[], label: string): void {
  assert.ok(
    expected.some((e) => e.status === actual.status && e.code === actual.code),
    `${label}: ${JSON.stringify(actual)} is none of ${JSON.stringify(expected)}`,
  );
}

againstEverySurface('content-type', (surface, listener) => {
  test('anything but application/json (charset=utf-8 allowed) is refused: 415 unsupported_media_type where a route takes JSON', async () => {
    for (const ct of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/json; charset=latin1',
      'application/json; foo=bar',
      'application/jsonx',
      'application/json-patch+json',
      'text/json',
    ]) {
      const r = await send(listener(), {
        method: 'POST',
        path: surface.bodyPath,
        headers: { 'content-type': ct },
        body: surface.jsonBody().body,
      });
      assertOneOf(outcomeOf(r), surface.otherMediaType, ct);
    }
    const form = await send(listener(), {
      method: 'POST',
      path: surface.bodyPath,
      headers: { 'content-type': 'text/plain' },
      body: 'intent_id=x',
    });
    assertOneOf(outcomeOf(form), surface.otherMediaType, 'form');
  });

  test('application/json, with or without charset=utf-8 in any case, is accepted', async () => {
    for (const ct of ['application/json', 'application/json; charset=utf-8', 'Application/JSON; Charset=UTF-8']) {
      const { body, outcome } = surface.jsonBody();
      const r = await send(listener(), { method: 'POST', path: surface.bodyPath, headers: { 'content-type': ct }, body });
      assert.deepEqual(outcomeOf(r), outcome, ct);
    }
  });

  test('a body without a Content-Type is refused like another media type', async () => {
    const r = await send(listener(), { method: 'POST', path: surface.bodyPath, body: '{"public_key":"ab"}' });
    assertOneOf(outcomeOf(r), surface.otherMediaType, 'no content-type');
  });
});
