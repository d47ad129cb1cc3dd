import type { IncomingMessage } from 'node:http';
import { domainToUnicode } from 'node:url';
import { AuthError, type Principal, requirementNeeds, safeReturnPath, unmetRequirement } from '@svc/core';
import type { AppPathRequirement } from '@svc/core/config';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { html, type SafeHtml } from '../pages/html.js';
import { DEFAULT_BRAND, newNonce, type PageBrand, type PageViewer, pageCsp, renderPage, sendPage } from '../pages/layout.js';
import { loginLocation } from './browser-session.js';
import { type LoginPageProvider, methodsInWords, providerWords, SIGN_IN_REFUSALS, type StepUpReason } from './login-page.js';

/** The browser route that ends the session (a form POST: a plain link would let any page sign the user out). */
const LOGOUT_PATH = '/.svc/auth/v1/logout';

/** Who was refused and what the path needs, for the refusals {@link requirementRefusal} made. */
interface RefusalContext {
  readonly principal: Principal;
  readonly requirement: AppPathRequirement;
}

const refusals = new WeakMap<AuthError, RefusalContext>();

/**
 * The `403 insufficient_claims` of a path requirement the principal does not meet, remembering
 * who was refused and what the path needs ({@link refusalContextOf}), so a browser can be shown a
 * page that says so. API clients get its problem+json.
 */
export function requirementRefusal(
  requirement: AppPathRequirement,
  principal: Principal,
  detail: string,
  headers: Record<string, string>,
): AuthError {
  const error = new AuthError('insufficient_claims', detail, { headers });
  refusals.set(error, { principal, requirement });
  return error;
}

/** Who was refused and what the path needs, when `err` is a refusal {@link requirementRefusal} made; else undefined. */
export function refusalContextOf(err: unknown): RefusalContext | undefined {
  return err instanceof AuthError ? refusals.get(err) : undefined;
}

/**
 * Whether a refused request is a browser's (`Accept` names `text/html`, no `Authorization`: a
 * bearer client keeps the problem+json whatever it accepts), which is shown an HTML page.
 */
export function wantsHtmlRefusal(req: FastifyRequest): boolean {
  if (req.headers.authorization !== undefined) return false;
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.toLowerCase().includes('text/html');
}

/**
 * Why signing in again would let `principal` in where `requirement` refuses it, or null: every
 * other field of the requirement holds (groups, email, subjects: another sign-in changes none of
 * them), and what is missing is a recent sign-in (`maxAuthAgeSeconds`) or a method (`amr`).
 *
 * @example
 * stepUpReason({ ...req, maxAuthAgeSeconds: 300 }, principalSignedInAnHourAgo, Date.now()); // 'recent'
 */
export function stepUpReason(requirement: AppPathRequirement, principal: Principal, now: number): StepUpReason | null {
  if (requirement.amr === null && requirement.maxAuthAgeSeconds === null) return null;
  if (unmetRequirement({ ...requirement, amr: null, maxAuthAgeSeconds: null }, principal, now) !== null) return null;
  if (requirement.amr !== null && unmetRequirement({ ...requirement, maxAuthAgeSeconds: null }, principal, now) !== null) return 'method';
  return unmetRequirement(requirement, principal, now) === null ? null : 'recent';
}

/** Where a browser is sent to sign in again (step-up), coming back to `returnPath`. */
export function stepUpLocation(returnPath: string, reason: StepUpReason): string {
  const base = loginLocation(returnPath);
  return `${base}${base.includes('?') ? '&' : '?'}step-up=${reason}`;
}

/** A domain as a person reads it: an A-label one (`xn--bcher-kva.example`) in Unicode (`bücher.example`). */
function displayDomain(domain: string): string {
  const unicode = domainToUnicode(domain);
  return unicode === '' ? domain : unicode;
}

/** An email as a person reads it: its domain by {@link displayDomain}. */
function displayEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return `${email.slice(0, at + 1)}${displayDomain(email.slice(at + 1))}`;
}

/** Who the page says is signed in: the name and email when known, else the subject id. */
function signedInAs(principal: Principal): string {
  const { name, email, email_verified } = principal.claims;
  if (email === undefined) return name ?? principal.subject;
  const mail = displayEmail(email);
  if (name !== undefined) return `${name} (${mail}${email_verified === true ? '' : ', not verified'})`;
  return `${mail}${email_verified === true ? '' : ' (not verified)'}`;
}

/** The header's "Signed in as" of a principal, with the gateway's sign-out form. */
function viewerOf(principal: Principal): PageViewer {
  return {
    name: principal.claims.name ?? null,
    email: principal.claims.email === undefined ? null : displayEmail(principal.claims.email),
    subject: principal.subject,
    signOutPath: LOGOUT_PATH,
  };
}

/**
 * What a requirement asks for, in words: core's `requirementNeeds`, with the methods said as
 * people know them ("a sign-in with a passkey") and the age in minutes when it is whole minutes.
 */
function needsInWords(requirement: AppPathRequirement): string[] {
  const words = requirementNeeds({ ...requirement, amr: null, maxAuthAgeSeconds: null }, displayDomain);
  if (requirement.amr !== null) {
    words.push(`a sign-in with ${methodsInWords(requirement.amr)}`);
  }
  const age = requirement.maxAuthAgeSeconds;
  if (age !== null) {
    words.push(
      age % 60 === 0 && age >= 120
        ? `a sign-in in the last ${age / 60} minutes`
        : `a sign-in in the last ${age} second${age === 1 ? '' : 's'}`,
    );
  }
  return words;
}

/**
 * The page a browser gets for `403 insufficient_claims`, in the house layout: who it is signed
 * in as (name and email, else the subject), what the path needs, and a way to sign in again as
 * someone else (a same-origin form POST to the logout route, which ends the session and goes to
 * the sign-in page). Everything shown is escaped.
 *
 * @example
 * renderRefusalPage({ nonce, principal, requirement });
 */
export function renderRefusalPage(input: {
  readonly nonce: string;
  readonly principal: Principal;
  readonly requirement: AppPathRequirement;
  readonly brand?: PageBrand;
}): string {
  const needs = needsInWords(input.requirement);
  const main = html`<p>Signed in as <span class="who">${signedInAs(input.principal)}</span>. This page is not open to your account.</p>
<p>This page needs${needs.length > 1 ? ' all of' : ''}:</p>
<ul class="needs">
${needs.map((n) => html`<li>${n}</li>`)}
</ul>
<p>If you think you should have access, ask the people who run ${(input.brand ?? DEFAULT_BRAND).name}.</p>
<div class="actions">
<form method="post" action="${LOGOUT_PATH}" class="inline"><button type="submit" class="button primary">Sign out and use another account</button></form>
<a class="button" href="/">Go to the start page</a>
</div>
<p class="muted">Reference: <code>insufficient_claims</code></p>`;
  return renderPage({
    nonce: input.nonce,
    title: 'You do not have access to this page',
    main,
    ...(input.brand === undefined ? {} : { brand: input.brand }),
    viewer: viewerOf(input.principal),
    data: { width: 'medium' },
  });
}

/** Sends {@link renderRefusalPage} as the `403` of `refusal`. */
export function sendRefusalPage(reply: FastifyReply, refusal: AuthError, context: RefusalContext, brand?: PageBrand): FastifyReply {
  const nonce = newNonce();
  for (const [name, value] of Object.entries(refusal.headers)) reply.header(name, value);
  return sendPage(
    reply,
    403,
    nonce,
    renderRefusalPage({ nonce, principal: context.principal, requirement: context.requirement, ...(brand === undefined ? {} : { brand }) }),
  );
}

/** What the gateway's pages know about the deployment: the brand and the providers (by alias, with their labels). */
export interface GatewayPageContext {
  readonly brand: PageBrand;
  readonly providers: readonly LoginPageProvider[];
}

/** "30 seconds", "2 minutes", "about an hour": a `Retry-After` in words. */
export function retryInWords(seconds: number): string {
  if (seconds <= 1) return 'a second';
  if (seconds < 90) return `${seconds} seconds`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes} minutes`;
  return `${Math.round(minutes / 60)} hours`;
}

/** A page's content for one refusal: its title, what to say, and what to do next. */
interface RefusalWords {
  readonly title: string;
  readonly body: SafeHtml;
}

/** The page of `err` for a browser, in words; never `err.detail` (it may say more than a person needs, or an attacker should see). */
function wordsFor(err: AuthError, req: FastifyRequest, ctx: GatewayPageContext): RefusalWords {
  const app = ctx.brand.name;
  const here = safeReturnPath(req.url) ?? '/';
  const retryHeader = Number(err.headers['retry-after']);
  const retry = Number.isInteger(retryHeader) && retryHeader > 0 ? retryInWords(retryHeader) : null;
  const again = req.method === 'GET' ? html`<a class="button primary" href="${here}">Try again</a>` : null;
  const home = html`<a class="button" href="/">Go to the start page</a>`;
  const signIn = html`<a class="button primary" href="${loginLocation(req.method === 'GET' ? here : '/')}">Sign in</a>`;
  const provider = (() => {
    const alias = (req.params as { name?: unknown } | undefined)?.name;
    const found = ctx.providers.find((p) => p.name === alias);
    return found === undefined ? null : providerWords(found);
  })();
  const known = SIGN_IN_REFUSALS[err.code];
  if (known !== undefined)
    return { title: known.title, body: html`<p>${known.message}</p><div class="actions">${signInAgainLinkTo('/')}</div>` };
  switch (err.code) {
    case 'not_found':
      return {
        title: 'Page not found',
        body: html`<p>There is no page at this address. Check the link, or start again from the start page.</p><div class="actions">${home}</div>`,
      };
    case 'method_not_allowed':
      return {
        title: 'This action is not available here',
        body: html`<p>The page you came from sent something this address does not take.</p><div class="actions">${home}</div>`,
      };
    case 'invalid_request':
    case 'payload_too_large':
    case 'unsupported_media_type':
      return {
        title: 'This request could not be understood',
        body: html`<p>The link or form you used is not valid here, or it is incomplete. Go back and try again, or start from the start page.</p><div class="actions">${home}</div>`,
      };
    case 'upstream_unavailable':
      return {
        title: `${app} cannot be reached right now`,
        body: html`<p>${app} is not accepting connections at the moment. This is usually short: try again in a minute.</p>
<p>If it lasts, tell the people who run ${app}.</p><div class="actions">${again}${home}</div>`,
      };
    case 'upstream_timeout':
      return {
        title: `${app} is not answering`,
        body: html`<p>${app} took too long to answer. It may be busy: try again in a minute.</p>
<p>If it keeps happening, tell the people who run ${app}.</p><div class="actions">${again}${home}</div>`,
      };
    case 'provider_unavailable':
    case 'identity_provider_unavailable':
      return {
        title: 'Sign-in is unavailable right now',
        body: html`<p>Signing in with ${provider ?? 'this method'} is not possible at the moment: ${
          err.code === 'identity_provider_unavailable' ? 'the sign-in service is not answering' : 'it is restarting'
        }. Try again${retry === null ? ' in a minute' : ` in ${retry}`}${ctx.providers.length > 1 ? ', or use another way to sign in' : ''}.</p><div class="actions">${signInAgainLinkTo('/')}</div>`,
      };
    case 'rate_limited':
      return {
        title: 'Too many attempts',
        body: html`<p>There were too many attempts from your network. For your safety, wait ${retry ?? 'a few minutes'} before you try again.</p><div class="actions">${home}</div>`,
      };
    case 'store_unavailable':
      return {
        title: 'Temporarily unavailable',
        body: html`<p>The sign-in service cannot answer for a moment. Try again${retry === null ? ' in a minute' : ` in ${retry}`}.</p><div class="actions">${again}</div>`,
      };
    case 'csrf_refused':
      return {
        title: 'This request came from another site',
        body: html`<p>For your safety, ${app} only accepts this action from its own pages. Go back to ${app}, reload the page and try again.</p><div class="actions">${home}</div>`,
      };
    case 'invalid_token':
      return { title: 'Please sign in', body: html`<p>You need to sign in to see this page.</p><div class="actions">${signIn}</div>` };
    case 'insufficient_claims':
      return {
        title: 'You do not have access to this page',
        body: html`<p>Your account is not allowed here. If you think it should be, ask the people who run ${app}.</p><div class="actions">${home}</div>`,
      };
    default:
      if (err.status >= 500) {
        return {
          title: 'Something went wrong',
          body: html`<p>The sign-in service could not complete this request. Try again in a minute; if it keeps happening, tell the people who run ${app}.</p><div class="actions">${again}${home}</div>`,
        };
      }
      return { title: 'Request refused', body: html`<p>This request cannot be completed.</p><div class="actions">${home}</div>` };
  }
}

function signInAgainLinkTo(returnPath: string): SafeHtml {
  return html`<a class="button primary" href="${loginLocation(returnPath)}">Back to the sign-in page</a>`;
}

/**
 * The gateway's refusals as pages: for a browser ({@link wantsHtmlRefusal}), every refusal the
 * gateway itself answers (a 404 under `/.svc/`, a 400, the application unreachable or slow, a
 * provider outage, rate limiting, a disabled account, ...) is a page in the house layout with
 * the same status and headers (`Retry-After` included), saying what happened and what to do
 * next, and the stable code for whoever helps them; never the error's detail. Every other
 * client keeps problem+json (null).
 *
 * @example
 * setHtmlRefusals(app, gatewayRefusalPage({ brand, providers }));
 */
export function gatewayRefusalPage(ctx: GatewayPageContext) {
  return (req: FastifyRequest, reply: FastifyReply, err: AuthError): FastifyReply | null => {
    if (!wantsHtmlRefusal(req)) return null;
    const context = refusalContextOf(err);
    if (context !== undefined) return sendRefusalPage(reply, err, context, ctx.brand);
    const words = wordsFor(err, req, ctx);
    const nonce = newNonce();
    for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
    const main = html`${words.body}
<p class="muted">Reference: <code>${err.code}</code> (HTTP ${err.status})</p>`;
    return sendPage(reply, err.status, nonce, renderPage({ nonce, title: words.title, main, brand: ctx.brand, data: { width: 'medium' } }));
  };
}

/**
 * The page a browser gets for a request the header hygiene refuses before Fastify sees it (an
 * ambiguous path such as `/docs;jsessionid=1`, a smuggling attempt): `400` in the house
 * layout, in the same words as the gateway's other `400`s, never the refusal's detail. Null for
 * every other client (problem+json), by the same rule as {@link wantsHtmlRefusal}.
 *
 * @example
 * installHeaderHygiene(server, isIdentity, { page: rawRefusalPage(brand) });
 */
export function rawRefusalPage(brand: PageBrand) {
  return (req: IncomingMessage, err: AuthError): { body: string; headers: Record<string, string> } | null => {
    const accept = req.headers.accept;
    if (req.headers.authorization !== undefined || typeof accept !== 'string' || !accept.toLowerCase().includes('text/html')) return null;
    const nonce = newNonce();
    const main = html`<p>The link or form you used is not valid here, or it is incomplete. Go back and try again, or start from the start page.</p>
<div class="actions"><a class="button" href="/">Go to the start page</a></div>
<p class="muted">Reference: <code>${err.code}</code> (HTTP ${err.status})</p>`;
    return {
      body: renderPage({ nonce, title: 'This request could not be understood', main, brand, data: { width: 'medium' } }),
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        'referrer-policy': 'same-origin',
        'content-security-policy': pageCsp(nonce),
      },
    };
  };
}
