import {
  type AuthDeps,
  AuthError,
  csrfRefusal,
  type Principal,
  type ProviderHandle,
  removeOwnLink,
  renameOwnLink,
  revokeOtherSessions,
  signInMethodWords,
} from '@svc/core';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { newNonce, type PageBrand, sendPage } from '../pages/layout.js';
import { ACCOUNT_PATH, type AccountNotice, passkeyTitle, renderAccountPage } from './account-page.js';
import { cookieNamesOf, readSessionCookies } from './browser-cookies.js';
import { applyCookieEffects, cookieIdentity, gatewayOriginOf, loginLocation } from './browser-session.js';

/** What {@link accountRoutes} receives. */
export interface AccountRouteOptions {
  readonly deps: AuthDeps;
  readonly providers: readonly ProviderHandle[];
  /** The configured public origin, or undefined: each request's own. */
  readonly publicOrigin: string | undefined;
  /** How the page presents the company (`:svc/app-brand`); the house default without it. */
  readonly brand?: PageBrand;
}

/** The most a form of the account page sends (a name): anything longer is refused before it is read. */
const FORM_BODY_LIMIT = 4096;

/** An action's outcome that ended this browser's own session. */
const SIGNED_OUT = 'signed-out';

/** What the page says after an action that went through (`?done=`). */
const DONE: Readonly<Record<string, string>> = {
  added: 'Your new passkey is ready. Give it a name you will recognise.',
  renamed: 'The passkey was renamed.',
  removed: 'The passkey was removed: it can no longer sign in to your account.',
  unlinked: 'The company sign-in was unlinked: it can no longer sign in to your account.',
  'signed-out-elsewhere': 'You are now signed out everywhere else.',
};

/** A refusal of an action, in words for the person (never the internal detail). */
function refusalText(err: AuthError): string {
  switch (err.code) {
    case 'last_credential':
      return 'This passkey is your only way to sign in, so it was not removed. Add another passkey first, then remove this one.';
    case 'invalid_request':
      return 'That name cannot be used: type 1 to 128 characters, without control characters.';
    case 'not_found':
      return 'That passkey is no longer on your account.';
    default:
      return 'That did not work. Reload the page and try again.';
  }
}

/** A provider's label (`:provider/label`), when the provider has one. */
function labelOf(provider: ProviderHandle | undefined): string | undefined {
  const label = (provider?.policy as { readonly label?: unknown } | undefined)?.label;
  return typeof label === 'string' && label !== '' ? label : undefined;
}

/**
 * The account page of the application gateway, under `/.svc/account`, for the browser signed in
 * by the gateway's session cookies (refreshed transparently; a browser without a session is sent
 * to the sign-in page and back):
 *
 * - `GET /.svc/account`: the page (see {@link renderAccountPage}).
 * - `POST /.svc/account/sessions/revoke-others`: sign out everywhere else.
 * - `POST /.svc/account/passkeys/<id>/rename` (form field `name`) and `.../remove`: the caller's
 *   own passkeys only; removing the last way in is refused (`409 last_credential`, shown on the page).
 *
 * Adding a passkey is the link ceremony of the sign-in routes (`intent: link`), run by the page's
 * script. Every action is a same-origin form POST (`403 csrf_refused` from any other origin,
 * before its body is read), answered by a redirect to the page with what happened, and audited
 * as self-service (`via: 'self'`).
 *
 * @example
 * await app.register(accountRoutes, { deps, providers, publicOrigin: undefined });
 */
export const accountRoutes: FastifyPluginAsync<AccountRouteOptions> = async (app, { deps, providers, publicOrigin, brand }) => {
  const passkeyProviders = providers.filter((p) => p.kind === 'webauthn' && p.policy.realms.includes('application'));
  const byName = new Map(providers.map((p) => [p.policy.name, p]));

  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, (_req, body, done) => {
    const fields: Record<string, string> = {};
    for (const [k, v] of new URLSearchParams(body as string)) fields[k] = v;
    done(null, fields);
  });

  /** The signed-in principal of the browser, or null: cookies only (a bearer client has the JSON routes). */
  const viewerOf = async (req: FastifyRequest, reply: FastifyReply): Promise<Principal | null> => {
    if (req.headers.authorization !== undefined) return null;
    const cookies = readSessionCookies(req.headers.cookie, cookieNamesOf(req));
    const identity = await cookieIdentity(deps, cookies, req.ip, true);
    applyCookieEffects(req, reply, { refreshed: identity.refreshed, clear: identity.stale });
    return identity.principal;
  };

  /** The page, with its notice, for `principal`. */
  const showPage = async (reply: FastifyReply, principal: Principal, status: number, notice: AccountNotice | null) => {
    const now = deps.clock.now();
    const own = { realm: principal.realm, subject: principal.subject };
    const [sessions, links, devices] = await Promise.all([
      deps.store.listActiveSessions({ now, ...own }),
      deps.store.listLinks(own),
      deps.store.listDevices(own),
    ]);
    const names = new Map<string, string>([
      ...links.map(
        (l) =>
          [
            l.id,
            byName.get(l.provider)?.kind === 'webauthn'
              ? passkeyTitle(l, principal)
              : `${labelOf(byName.get(l.provider)) ?? 'your company sign-in'} (${l.name})`,
          ] as const,
      ),
      ...devices.map((d) => [d.id, `Device key ${d.name}`] as const),
    ]);
    const isPasskey = (provider: string) => byName.get(provider)?.kind === 'webauthn';
    const passkeys = links.filter((l) => isPasskey(l.provider));
    const currentLink = links.find((l) => l.id === principal.device);
    const nonce = newNonce();
    const page = renderAccountPage({
      nonce,
      ...(brand === undefined ? {} : { brand }),
      principal,
      signedInWith: signInMethodWords(principal.claims.amr, labelOf(currentLink && byName.get(currentLink.provider))),
      sessions: sessions.map((s) => ({
        id: s.id,
        via: names.get(s.deviceId) ?? null,
        address: s.clientAddress,
        userAgent: s.userAgent,
        createdAt: s.createdAt,
        lastUsedAt: s.lastRotatedAt ?? s.createdAt,
        current: s.id === principal.session,
      })),
      passkeys: passkeys.map((l) => ({
        id: l.id,
        name: l.name,
        createdAt: l.createdAt,
        lastUsedAt: l.lastUsedAt,
        current: l.id === principal.device,
      })),
      otherCredentials: links.length - passkeys.length + devices.length,
      logins: links
        .filter((l) => !isPasskey(l.provider))
        .map((l) => ({
          id: l.id,
          provider: labelOf(byName.get(l.provider)) ?? 'Your company sign-in',
          name: l.name,
          createdAt: l.createdAt,
          lastUsedAt: l.lastUsedAt,
          current: l.id === principal.device,
        })),
      passkeyProviders: passkeyProviders.map((p) => ({ name: p.policy.name })),
      notice,
    });
    return sendPage(reply, status, nonce, page, { script: passkeyProviders.length > 0, connect: passkeyProviders.length > 0 });
  };

  app.get<{ Querystring: { done?: string } }>(ACCOUNT_PATH, async (req, reply) => {
    const principal = await viewerOf(req, reply);
    if (principal === null) return reply.redirect(loginLocation(ACCOUNT_PATH), 302);
    const done = typeof req.query.done === 'string' ? DONE[req.query.done] : undefined;
    return showPage(reply, principal, 200, done === undefined ? null : { kind: 'notice', text: done });
  });

  // The actions: same origin only (the cookie CSRF rule of the gateway, core's `csrfRefusal`),
  // checked before the body is read; then the signed-in principal; then the use case.
  await app.register(async (scope) => {
    scope.addHook('onRequest', async (req) => {
      const site = req.headers['sec-fetch-site'];
      const refusal = csrfRefusal({
        method: req.method,
        origin: req.headers.origin,
        secFetchSite: Array.isArray(site) ? site[0] : site,
        gatewayOrigin: gatewayOriginOf(req, publicOrigin),
      });
      if (refusal !== null) throw new AuthError('csrf_refused', `${refusal}; the account page only answers this origin's own forms`);
    });

    /** Runs an action for the signed-in browser: a redirect to the page with its outcome, or the page with the refusal. */
    const act = async (req: FastifyRequest, reply: FastifyReply, action: (principal: Principal) => Promise<string>) => {
      const principal = await viewerOf(req, reply);
      if (principal === null) return reply.redirect(loginLocation(ACCOUNT_PATH), 303);
      let done: string;
      try {
        done = await action(principal);
      } catch (err) {
        if (!(err instanceof AuthError) || err.status >= 500) throw err;
        req.log.info({ code: err.code, status: err.status }, 'account action refused');
        return showPage(reply, principal, err.status, { kind: 'error', text: refusalText(err) });
      }
      return reply.redirect(done === SIGNED_OUT ? loginLocation(ACCOUNT_PATH) : `${ACCOUNT_PATH}?done=${done}`, 303);
    };
    const fieldOf = (req: FastifyRequest, name: string): unknown => {
      const body = req.body as Record<string, unknown> | undefined;
      return body === undefined || body === null ? undefined : body[name];
    };

    scope.post(`${ACCOUNT_PATH}/sessions/revoke-others`, async (req, reply) =>
      act(req, reply, async (principal) => {
        await revokeOtherSessions(deps, { principal, via: 'self' });
        return 'signed-out-elsewhere';
      }),
    );

    scope.post<{ Params: { id: string } }>(`${ACCOUNT_PATH}/passkeys/:id/rename`, async (req, reply) =>
      act(req, reply, async (principal) => {
        await renameOwnLink(deps, { principal, linkId: req.params.id, name: fieldOf(req, 'name') });
        return 'renamed';
      }),
    );

    // A passkey or a company login: either is one of the person's links, removed by the same rule
    // (never the last way in).
    for (const kind of ['passkeys', 'logins'] as const) {
      scope.post<{ Params: { id: string } }>(`${ACCOUNT_PATH}/${kind}/:id/remove`, async (req, reply) =>
        act(req, reply, async (principal) => {
          const removed = await removeOwnLink(deps, { principal, linkId: req.params.id });
          // The credential that signed this browser in ended this session too: the sign-in page next.
          return removed.signed_out ? SIGNED_OUT : kind === 'passkeys' ? 'removed' : 'unlinked';
        }),
      );
    }
  });
};
