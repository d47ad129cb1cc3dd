import { randomBytes } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { html, type SafeHtml, trustedMarkup } from './html.js';

/**
 * How pages present the company (`:svc/app-brand`): the product name in the header and the
 * title, an optional logo (a data: URI, read from the configured file at load), and the accent
 * colour of the header bar and primary buttons.
 */
export interface PageBrand {
  readonly name: string;
  /** `#rrggbb`. */
  readonly accent: string;
  /** `data:image/png;base64,...` (or svg+xml), or null. */
  readonly logo: string | null;
}

/** The brand when none is configured. */
export const DEFAULT_BRAND: PageBrand = Object.freeze({ name: 'svc', accent: '#1d4ed8', logo: null });

/** Who the page is shown to, when signed in: shown in the header with a sign-out button. */
export interface PageViewer {
  readonly name: string | null;
  readonly email: string | null;
  readonly subject: string;
  /** Where the sign-out form posts (`/.svc/auth/v1/logout` on the gateway, `/console/logout` on the console). */
  readonly signOutPath: string;
  /** The CSRF token the sign-out form carries, where the surface asks for one. */
  readonly csrfToken?: string;
}

/**
 * A new CSP nonce: 144 bits, base64.
 *
 * @example
 * const nonce = newNonce();
 */
export function newNonce(): string {
  return randomBytes(18).toString('base64');
}

/**
 * The Content-Security-Policy of a page: nothing from any other origin; the page's own style
 * and (when it has one) script by nonce only; images from data: URIs (the logo) and this
 * origin; forms post to this origin only.
 *
 * @example
 * reply.header('content-security-policy', pageCsp(nonce, { script: true, connect: true }));
 */
export function pageCsp(nonce: string, options: { readonly script?: boolean; readonly connect?: boolean } = {}): string {
  return [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    ...(options.script === true ? [`script-src 'nonce-${nonce}'`] : []),
    ...(options.connect === true ? ["connect-src 'self'"] : []),
    "img-src 'self' data:",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * Sends a page with its status, CSP, `Cache-Control: no-store` and no referrer.
 *
 * @example
 * sendPage(reply, 403, nonce, renderPage({ nonce, title: 'Not allowed', main }));
 */
export function sendPage(
  reply: FastifyReply,
  status: number,
  nonce: string,
  page: string,
  options: { readonly script?: boolean; readonly connect?: boolean } = {},
): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('referrer-policy', 'same-origin')
    .header('content-security-policy', pageCsp(nonce, options))
    .send(page);
}

/**
 * A whole page in the house layout: a header with the brand (and who is signed in, with a
 * sign-out button), the page's `<main>`, and its optional script. Readable at 360 px wide,
 * usable by keyboard (a skip link, visible focus), one `<h1>` (the title).
 *
 * @example
 * renderPage({ nonce, title: 'Your account', main: html`<p>Hello ${name}</p>` });
 */
export function renderPage(input: {
  readonly nonce: string;
  readonly title: string;
  readonly main: SafeHtml;
  readonly brand?: PageBrand;
  readonly viewer?: PageViewer | null;
  /** Navigation links shown under the header (the console's sections, the account page's). */
  readonly nav?: readonly { readonly href: string; readonly label: string; readonly current?: boolean }[];
  /** The page's inline script (constant code from this repository). */
  readonly script?: string;
  /** `data-*` attributes of `<body>` (what the script reads). */
  readonly data?: Readonly<Record<string, string>>;
}): string {
  const brand = input.brand ?? DEFAULT_BRAND;
  const accent = /^#[0-9a-fA-F]{6}$/.test(brand.accent) ? brand.accent : DEFAULT_BRAND.accent;
  const viewer = input.viewer ?? null;
  const data = Object.entries(input.data ?? {}).map(([k, v]) => html` data-${k.replace(/[^a-z0-9-]/g, '')}="${v}"`);
  const who = viewer === null ? null : (viewer.name ?? viewer.email ?? viewer.subject);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${input.title} · ${brand.name}</title>
<style nonce="${input.nonce}">${trustedMarkup(PAGE_STYLE)}
:root { --accent: ${accent}; }</style>
</head>
<body${data}>
<a class="skip" href="#main">Skip to content</a>
<header class="bar">
  <span class="brand">${brand.logo !== null && html`<img src="${brand.logo}" alt="" class="logo">`}${brand.name}</span>
  ${
    viewer !== null &&
    html`<form method="post" action="${viewer.signOutPath}" class="signout">
    <span class="who">Signed in as <strong>${who}</strong></span>
    ${viewer.csrfToken !== undefined && html`<input type="hidden" name="csrf" value="${viewer.csrfToken}">`}
    <button type="submit" class="button link">Sign out</button>
  </form>`
  }
</header>
${
  input.nav !== undefined &&
  html`<nav aria-label="Sections"><ul class="nav">${input.nav.map(
    (n) => html`<li><a href="${n.href}"${n.current === true ? html` aria-current="page"` : ''}>${n.label}</a></li>`,
  )}</ul></nav>`
}
<main id="main">
<h1>${input.title}</h1>
${input.main}
</main>
${input.script !== undefined && html`<script nonce="${input.nonce}">${trustedMarkup(input.script)}</script>`}
</body>
</html>
`.toString();
}

// One stylesheet for every page: system fonts, high contrast, visible focus, fluid to 360 px.
const PAGE_STYLE = `
*, *::before, *::after { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Droid Sans Fallback", sans-serif; color: #111827; background: #f3f4f6; }
.skip { position: absolute; left: -999px; top: 0; background: #fff; padding: 0.5rem; }
.skip:focus { left: 0.5rem; z-index: 10; }
.bar { display: flex; flex-wrap: wrap; align-items: center; justify-content: space-between; gap: 0.5rem; padding: 0.75rem 1rem; background: var(--accent); color: #fff; }
.brand { display: inline-flex; align-items: center; gap: 0.5rem; font-weight: 600; font-size: 1.1rem; }
.logo { height: 1.75rem; width: auto; }
.signout { display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem; margin: 0; }
.bar .button.link { color: #fff; border-color: #fff; background: transparent; }
.nav { display: flex; flex-wrap: wrap; gap: 0.25rem 1rem; list-style: none; margin: 0; padding: 0.5rem 1rem; background: #fff; border-bottom: 1px solid #d1d5db; }
.nav a { color: #1e3a8a; }
.nav a[aria-current="page"] { font-weight: 700; text-decoration: none; }
main { max-width: 56rem; margin: 1.5rem auto; padding: 1.25rem; background: #fff; border: 1px solid #d1d5db; border-radius: 0.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 0.5rem; }
a { color: #1e3a8a; }
:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.button { display: inline-block; min-height: 2.5rem; padding: 0.5rem 1rem; font: inherit; border: 1px solid #374151; border-radius: 0.375rem; background: #fff; color: #111827; text-decoration: none; cursor: pointer; }
.button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
.button.danger { border-color: #991b1b; color: #991b1b; }
.button.block { display: block; width: 100%; margin: 0.5rem 0; text-align: center; }
label { display: block; font-weight: 600; margin: 0.75rem 0 0.25rem; }
input[type=text], input[type=email], input[type=search], select { width: 100%; max-width: 28rem; min-height: 2.5rem; padding: 0.4rem 0.6rem; font: inherit; border: 1px solid #6b7280; border-radius: 0.375rem; }
.notice { border-left: 4px solid var(--accent); background: #eff6ff; padding: 0.5rem 0.75rem; }
.error { border-left: 4px solid #b91c1c; background: #fef2f2; padding: 0.5rem 0.75rem; }
.muted, .code { color: #4b5563; font-size: 0.9rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 0.5rem; border-bottom: 1px solid #e5e7eb; vertical-align: top; }
th { font-size: 0.85rem; text-transform: uppercase; letter-spacing: 0.03em; color: #374151; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 0.9em; overflow-wrap: anywhere; }
.actions { display: flex; flex-wrap: wrap; gap: 0.5rem; margin-top: 1rem; }
.inline { display: inline; }
/* account page (#29) */
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.35rem 1rem; margin: 0; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.tag { display: inline-block; padding: 0 0.45rem; border-radius: 999px; border: 1px solid #6b7280; font-size: 0.8rem; color: #374151; }
.tag.ok { border-color: #166534; color: #166534; background: #f0fdf4; }
.tags { display: flex; flex-wrap: wrap; gap: 0.35rem; list-style: none; margin: 0; padding: 0; }
.cards { list-style: none; margin: 0; padding: 0; display: grid; gap: 0.75rem; }
.card { border: 1px solid #d1d5db; border-radius: 0.5rem; padding: 0.75rem 1rem; }
.card p { margin: 0.25rem 0; }
.card .row { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 0.5rem; margin-top: 0.5rem; }
.card .row form { margin: 0; }
.rename { flex: 0 1 auto; }
.rename[open] { flex-basis: 100%; }
.rename[open] summary { margin-bottom: 0.25rem; }
.rename summary { list-style: none; }
.rename summary::-webkit-details-marker { display: none; }
.rename form { display: flex; flex-wrap: wrap; align-items: flex-end; gap: 0.5rem; }
.rename label { flex-basis: 100%; margin: 0.25rem 0 0; }
.rename input[type=text] { flex: 1 1 12rem; }
@media (max-width: 480px) { main { margin: 0; border-radius: 0; border-left: 0; border-right: 0; } th, td { padding: 0.4rem 0.25rem; } }
body[data-width="narrow"] main { max-width: 30rem; }
body[data-width="medium"] main { max-width: 40rem; }
.status:empty { display: none; }
.status { color: #991b1b; font-weight: 600; }
.needs { padding-left: 1.25rem; }
/* console */
.who { overflow-wrap: anywhere; min-width: 0; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.bad { color: #991b1b; }
.facts { display: grid; grid-template-columns: minmax(6rem, max-content) minmax(0, 1fr); gap: 0.25rem 1rem; margin: 0 0 1rem; }
.facts dt { font-weight: 600; }
.facts dd { margin: 0; overflow-wrap: anywhere; }
.code-big { font-size: 1.75rem; letter-spacing: 0.1em; }
pre { background: #f3f4f6; padding: 0.5rem 0.75rem; border-radius: 0.375rem; overflow-x: auto; }
tr.fresh { background: #fefce8; }
caption { text-align: left; padding: 0.25rem 0; }
details { margin-top: 1.5rem; }
summary { cursor: pointer; font-weight: 600; }
body[data-console] main { max-width: 72rem; width: calc(100% - 2rem); }
@media (max-width: 480px) { body[data-console] main { width: auto; } }
.audit a { white-space: nowrap; }
@media (max-width: 480px) {
  body[data-console] table, body[data-console] tbody { display: block; width: 100%; }
  body[data-console] thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  body[data-console] caption { display: block; }
  body[data-console] tr { display: block; padding: 0.5rem 0; border-bottom: 1px solid #e5e7eb; }
  body[data-console] td { display: inline-block; border: 0; padding: 0.15rem 0.75rem 0.15rem 0; vertical-align: top; }
  body[data-console] td.details { display: block; min-width: 0; }
  body[data-console] .when, body[data-console] code.type { white-space: normal; overflow-wrap: anywhere; }
}
body[data-console] .table-wrap { position: relative; }
.filters { display: flex; flex-wrap: wrap; align-items: flex-end; gap: 0 1rem; margin-bottom: 1rem; }
.filters .field { flex: 1 1 10rem; }
.filters .field.wide { flex: 2 1 16rem; }
.filters .actions { margin-top: 0.5rem; }
.when { white-space: nowrap; }
code.type { white-space: nowrap; overflow-wrap: normal; }
td.details { overflow-wrap: anywhere; min-width: 14rem; }
ul.plain { list-style: none; margin: 0 0 0.25rem; padding: 0; }
.good { color: #166534; }
`;
