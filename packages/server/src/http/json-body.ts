import { AuthError } from '@svc/core';
import { MAX_REQUEST_BODY_BYTES } from '@svc/core/settings';
import type { FastifyInstance } from 'fastify';

/** The largest request body accepted: core's {@link MAX_REQUEST_BODY_BYTES}, the one place the number lives. */
export const BODY_LIMIT = MAX_REQUEST_BODY_BYTES;

/**
 * Whether a `Content-Type` is JSON in UTF-8: `application/json`, optionally with
 * `charset=utf-8` (any case, optionally quoted), and no other parameter.
 *
 * @example
 * isJsonContentType('application/json; charset=UTF-8'); // true
 * isJsonContentType('application/json; charset=latin1'); // false
 */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const parts = value.toLowerCase().split(';');
  if (parts[0]?.trim() !== 'application/json') return false;
  for (let i = 1; i < parts.length; i++) {
    const param = parts[i]?.trim() ?? '';
    if (param !== 'charset=utf-8' && param !== 'charset="utf-8"') return false;
  }
  return true;
}

/**
 * Makes JSON the only body a surface understands: every other content type parser is
 * removed (so `text/plain`, forms and the rest get `415 unsupported_media_type`), and the
 * JSON parser refuses `__proto__` and `constructor.prototype` keys (prototype poisoning)
 * instead of silently dropping them.
 *
 * @example
 * installJsonBodyParser(app);
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (req, body, done) => {
    if (!isJsonContentType(req.headers['content-type'])) {
      done(new AuthError('unsupported_media_type', 'bodies must be application/json in UTF-8'), undefined);
      return;
    }
    parseJson(req, typeof body === 'string' ? body : body.toString('utf8'), done);
  });
}
