import { ACCOUNT_PAGE_PATH } from '@svc/core';
import { type DocumentedSchema, documented, problemResponses } from '../http/problem-schema.js';

const redirect = (description: string) => ({
  type: 'null',
  description,
  headers: { location: { type: 'string', description: 'the target' } },
});

const linkParams = {
  type: 'object',
  required: ['id'],
  additionalProperties: false,
  properties: { id: { type: 'string', description: 'the passkey (a link id, `lnk_...`) of the signed-in person' } },
} as const;

const page = (description: string) => ({ description, content: { 'text/html': { schema: { type: 'string' } } } });

/** Where an action of the account page sends the browser when it went through. */
const DONE = redirect('Done: back to the account page (`?done=...` says what happened), or to sign in when there is no session');

/**
 * The account page's routes (`/.svc/account`, see `gateway/account-routes.ts`) as the OpenAPI
 * document describes them: HTML and form posts for a browser signed in by the gateway's cookies.
 */
export const ACCOUNT_ROUTE_DOCS: Readonly<Record<string, DocumentedSchema>> = {
  [`GET ${ACCOUNT_PAGE_PATH}`]: documented({
    summary: "The person's account page (HTML): who they are, their passkeys and sessions",
    querystring: { type: 'object', properties: { done: { type: 'string', description: 'what the last action did (a notice)' } } },
    response: { 200: page('The account page'), 302: redirect('No session: to the sign-in page, and back'), ...problemResponses() },
  }),
  [`POST ${ACCOUNT_PAGE_PATH}/sessions/revoke-others`]: documented({
    summary: 'Sign out everywhere else (a same-origin form; audited as self-service)',
    response: { 303: DONE, ...problemResponses(403, 503) },
  }),
  [`POST ${ACCOUNT_PAGE_PATH}/passkeys/:id/rename`]: documented({
    summary: 'Rename one of your passkeys (a same-origin form, field `name`; audited as self-service)',
    params: linkParams,
    response: {
      303: DONE,
      400: page('The name cannot be used (the page says why)'),
      404: page('Not your passkey'),
      ...problemResponses(403, 503),
    },
  }),
  [`POST ${ACCOUNT_PAGE_PATH}/passkeys/:id/remove`]: documented({
    summary: 'Remove one of your passkeys, never the last way in (a same-origin form; audited as self-service)',
    params: linkParams,
    response: {
      303: DONE,
      404: page('Not your passkey'),
      409: page('`last_credential`: your only way to sign in (the page says so)'),
      ...problemResponses(403, 503),
    },
  }),
  [`POST ${ACCOUNT_PAGE_PATH}/logins/:id/remove`]: documented({
    summary: 'Unlink one of your company sign-ins, never the last way in (a same-origin form; audited as self-service)',
    params: linkParams,
    response: {
      303: DONE,
      404: page('Not your company sign-in'),
      409: page('`last_credential`: your only way to sign in (the page says so)'),
      ...problemResponses(403, 503),
    },
  }),
};
