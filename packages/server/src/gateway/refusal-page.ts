import { randomBytes } from 'node:crypto';
import { domainToUnicode } from 'node:url';
import { AuthError, type Principal, requirementNeeds } from '@svc/core';
import type { AppPathRequirement } from '@svc/core/config';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { escapeHtml } from './login-page.js';

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

const PAGE_STYLE = `
body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; color: #111; }
h1 { font-size: 1.4rem; }
.who { font-weight: 600; overflow-wrap: anywhere; }
ul { padding-left: 1.2rem; }
form { margin-top: 2rem; }
button { padding: 0.5rem 1rem; font-size: 1rem; border: 1px solid #555; border-radius: 0.4rem; background: #f4f4f4; cursor: pointer; }
`;

/**
 * The page a browser gets for `403 insufficient_claims`: who it is signed in as (name and
 * email, else the subject), what the path needs (core's `requirementNeeds`: "a member of ops
 * or admins", "an email at example.com, verified"), and a sign-out button (a same-origin form
 * POST to the logout route, which ends the session and goes to the sign-in page, so another
 * account can be used). Everything the page shows is escaped; its only style carries `nonce`.
 *
 * @example
 * renderRefusalPage({ nonce, principal, requirement });
 */
export function renderRefusalPage(input: {
  readonly nonce: string;
  readonly principal: Principal;
  readonly requirement: AppPathRequirement;
}): string {
  const needs = requirementNeeds(input.requirement, displayDomain);
  const nonce = escapeHtml(input.nonce);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>Not allowed here</title>
<style nonce="${nonce}">${PAGE_STYLE}</style>
</head>
<body>
<h1>You are signed in, but this page is not for your account</h1>
<p>Signed in as <span class="who">${escapeHtml(signedInAs(input.principal))}</span>.</p>
<p>This page needs${needs.length > 1 ? ' all of' : ''}:</p>
<ul>
${needs.map((n) => `<li>${escapeHtml(n)}</li>`).join('\n')}
</ul>
<p>If you think you should have access, ask the people who run this application.</p>
<form method="post" action="${LOGOUT_PATH}"><button type="submit">Sign out and use another account</button></form>
</body>
</html>
`;
}

/** Sends {@link renderRefusalPage} as the `403` of `refusal`, with its own Content-Security-Policy. */
export function sendRefusalPage(reply: FastifyReply, refusal: AuthError, context: RefusalContext): FastifyReply {
  const nonce = randomBytes(18).toString('base64');
  for (const [name, value] of Object.entries(refusal.headers)) reply.header(name, value);
  return reply
    .code(403)
    .header(
      'content-security-policy',
      `default-src 'none'; style-src 'nonce-${nonce}'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
    )
    .header('referrer-policy', 'same-origin')
    .type('text/html; charset=utf-8')
    .send(renderRefusalPage({ nonce, principal: context.principal, requirement: context.requirement }));
}
