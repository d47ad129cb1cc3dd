import { domainToUnicode } from 'node:url';
import { ACCOUNT_PAGE_PATH, DISPLAY_NAME_MAX_CHARS, type Principal } from '@svc/core';
import { html, type SafeHtml } from '../pages/html.js';
import { type PageBrand, type PageViewer, renderPage } from '../pages/layout.js';

/** Where the account page lives on the application gateway (core's `ACCOUNT_PAGE_PATH`, a sign-in may return there). */
export const ACCOUNT_PATH = ACCOUNT_PAGE_PATH;

/** The sign-out route of the gateway (the layout's sign-out form posts there). */
const LOGOUT_PATH = '/.svc/auth/v1/logout';

/** One of the person's sessions, as the page shows it. */
export interface AccountSession {
  readonly id: string;
  /** The passkey's, linked login's or device key's name; null when it is gone. */
  readonly via: string | null;
  readonly address: string | null;
  readonly userAgent: string | null;
  readonly createdAt: number;
  /** The last rotation, else the creation. */
  readonly lastUsedAt: number;
  readonly current: boolean;
}

/** One of the person's company logins (a link of an identity provider other than passkeys). */
export interface AccountLogin {
  readonly id: string;
  /** The provider's label (`:provider/label`), else a plain description: never the module alias. */
  readonly provider: string;
  /** The identity it links (its email at the provider, as the link was named). */
  readonly name: string;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  /** Whether this session was signed in with it. */
  readonly current: boolean;
}

/** One of the person's passkeys (a WebAuthn link). */
export interface AccountPasskey {
  readonly id: string;
  readonly name: string;
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
  /** Whether this passkey signed the current session in. */
  readonly current: boolean;
}

/** A passkey provider the page can add a passkey with (its route segment, never shown). */
export interface AccountPasskeyProvider {
  readonly name: string;
}

/** What the page says after an action, or why one was refused. */
export interface AccountNotice {
  readonly kind: 'notice' | 'error';
  readonly text: string;
}

/** Everything the account page shows. */
export interface AccountPageInput {
  readonly nonce: string;
  readonly brand?: PageBrand;
  readonly principal: Principal;
  /** How this session was signed in, in words (core's `signInMethodWords`). */
  readonly signedInWith: string;
  readonly sessions: readonly AccountSession[];
  readonly passkeys: readonly AccountPasskey[];
  /** Other ways in the person has (linked company logins, device keys), counted for the "last one" hint. */
  readonly otherCredentials: number;
  /** The person's company logins (links of identity providers), listed beside the passkeys. */
  readonly logins?: readonly AccountLogin[];
  readonly passkeyProviders: readonly AccountPasskeyProvider[];
  readonly notice?: AccountNotice | null;
}

/** A date as people at a company read it: `27 Nov 2026, 16:40 UTC`. */
function when(ms: number): string {
  const d = new Date(ms);
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCDate()} ${months[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${two(d.getUTCHours())}:${two(d.getUTCMinutes())} UTC`;
}

/**
 * What the page calls a passkey: its own name, unless that is only the name the service gave it
 * when it was made (the person's name or email): then "Passkey added <date>", which tells two
 * apart.
 *
 * @example
 * passkeyTitle({ name: 'Ada Lovelace', createdAt }, principal); // 'Passkey added 27 Nov 2026, 16:40 UTC'
 */
export function passkeyTitle(passkey: { readonly name: string; readonly createdAt: number }, principal: Principal): string {
  const { name, email } = principal.claims;
  const given = passkey.name === name || passkey.name === email || passkey.name === principal.subject;
  return given ? `Passkey added ${when(passkey.createdAt)}` : passkey.name;
}

function timeOf(ms: number): SafeHtml {
  return html`<time datetime="${new Date(ms).toISOString()}">${when(ms)}</time>`;
}

/** An email as a person reads it: an A-label domain (`xn--bcher-kva.example`) in Unicode. */
function displayEmail(email: string): string {
  const at = email.lastIndexOf('@');
  const unicode = domainToUnicode(email.slice(at + 1));
  return `${email.slice(0, at + 1)}${unicode === '' ? email.slice(at + 1) : unicode}`;
}

/** A user agent as a person recognises it: the browser and system, else the raw text cut short. */
export function describeUserAgent(userAgent: string | null): string {
  if (userAgent === null || userAgent === '') return 'Unknown browser';
  const browser = /Edg\//.test(userAgent)
    ? 'Edge'
    : /Firefox\//.test(userAgent)
      ? 'Firefox'
      : /(Chrome|Chromium)\//.test(userAgent)
        ? 'Chrome'
        : /Safari\//.test(userAgent)
          ? 'Safari'
          : null;
  const system = /Windows/.test(userAgent)
    ? 'Windows'
    : /Android/.test(userAgent)
      ? 'Android'
      : /iPhone|iPad/.test(userAgent)
        ? 'iOS'
        : /Mac OS X/.test(userAgent)
          ? 'macOS'
          : /Linux/.test(userAgent)
            ? 'Linux'
            : null;
  if (browser === null) return userAgent.length > 60 ? `${userAgent.slice(0, 57)}...` : userAgent;
  return system === null ? browser : `${browser} on ${system}`;
}

/** The inline script: only the "Add a passkey" button needs one (the WebAuthn ceremony runs in the browser). */
const ACCOUNT_SCRIPT = `
const button = document.getElementById('add-passkey');
const status = document.getElementById('add-status');
const MESSAGES = {
  NotAllowedError: 'The passkey was not created: the request was cancelled or timed out. Try again when you are ready.',
  InvalidStateError: 'This device already holds a passkey for your account. Use another device or security key.',
  already_linked: 'This passkey is already set up.',
};
async function post(url, body) {
  const r = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw Object.assign(new Error(answer.detail || r.statusText), { name: answer.code || 'Error' });
  return answer;
}
if (button) button.addEventListener('click', async () => {
  status.textContent = 'Follow your browser\\'s instructions to create the passkey...';
  button.disabled = true;
  try {
    const base = '/.svc/auth/v1/providers/' + encodeURIComponent(button.dataset.provider);
    const options = await post(base + '/begin', { intent: 'link', return: '/.svc/account' });
    const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) });
    await post(base + '/finish', credential.toJSON());
    location.assign('/.svc/account?done=added');
  } catch (err) {
    status.textContent = MESSAGES[err.name] || 'The passkey could not be added. Try again, or ask your administrator.';
    button.disabled = false;
  }
});
`;

/**
 * The account page of the application gateway (`/.svc/account`): who the person is (name,
 * email and whether it is verified, groups, how and when they signed in), their sessions with
 * "Sign out everywhere else", their passkeys (add another, rename, remove: never the last way
 * in), and sign out. Every action is a same-origin form POST; only adding a passkey runs script.
 *
 * @example
 * renderAccountPage({ nonce, principal, signedInWith: 'a passkey', sessions, passkeys, otherCredentials: 0, passkeyProviders });
 */
export function renderAccountPage(input: AccountPageInput): string {
  const { principal } = input;
  const { name, email, email_verified, groups } = principal.claims;
  const viewer: PageViewer = { name: name ?? null, email: email ?? null, subject: principal.subject, signOutPath: LOGOUT_PATH };
  const onlyWayIn = input.passkeys.length === 1 && input.otherCredentials === 0;
  const logins = input.logins ?? [];
  // A company login that is the person's one way in (no passkey, no other login or device key).
  const onlyLogin = input.passkeys.length === 0 && input.otherCredentials <= 1;
  const others = input.sessions.filter((s) => !s.current).length;
  const provider = input.passkeyProviders[0];
  const main = html`
${input.notice != null && html`<p class="${input.notice.kind}" role="${input.notice.kind === 'error' ? 'alert' : 'status'}">${input.notice.text}</p>`}
<section aria-labelledby="who">
<h2 id="who">Who you are</h2>
<dl class="facts">
  <dt>Name</dt><dd>${name ?? html`<span class="muted">Not set</span>`}</dd>
  <dt>Email</dt><dd>${
    email === undefined
      ? html`<span class="muted">Not set</span>`
      : html`${displayEmail(email)} ${email_verified === true ? html`<span class="tag ok">verified</span>` : html`<span class="tag">not verified</span>`}`
  }</dd>
  <dt>Groups</dt><dd>${
    groups === undefined || groups.length === 0
      ? html`<span class="muted">None</span>`
      : html`<ul class="tags">${groups.map((g) => html`<li class="tag">${g}</li>`)}</ul>`
  }</dd>
  <dt>Signed in</dt><dd>With ${input.signedInWith}, ${timeOf(Date.parse(principal.claims.auth_time))}</dd>
</dl>
</section>

<section aria-labelledby="passkeys">
<h2 id="passkeys">Your passkeys</h2>
${
  input.passkeys.length === 0
    ? html`<p>You have no passkey yet.</p>`
    : html`<ul class="cards passkeys">${input.passkeys.map((p) => {
        const title = passkeyTitle(p, principal);
        return html`<li class="card">
  <p class="card-title"><strong>${title}</strong>${p.current && html` <span class="tag ok">used for this session</span>`}</p>
  <p class="muted">${title === p.name ? html`Added ${timeOf(p.createdAt)}` : 'Not named yet'} · ${p.lastUsedAt === null ? 'never used to sign in' : html`last used ${timeOf(p.lastUsedAt)}`}</p>
  <div class="row">
  <details class="rename">
    <summary class="button">Rename</summary>
    <form method="post" action="${ACCOUNT_PATH}/passkeys/${p.id}/rename">
      <label for="name-${p.id}">New name (for example "Work laptop" or "Phone")</label>
      <input type="text" id="name-${p.id}" name="name" value="${title === p.name ? p.name : ''}" maxlength="${DISPLAY_NAME_MAX_CHARS}" required autocomplete="off">
      <button type="submit" class="button primary">Save name</button>
    </form>
  </details>
  ${
    !onlyWayIn &&
    html`<form method="post" action="${ACCOUNT_PATH}/passkeys/${p.id}/remove">
    <button type="submit" class="button danger" aria-label="Remove ${title}">Remove</button>
  </form>`
  }
  </div>
  ${onlyWayIn && html`<p class="muted">This is your only way to sign in, so it cannot be removed. Add another passkey first.</p>`}
</li>`;
      })}</ul>`
}
${
  provider !== undefined &&
  html`<p><button type="button" id="add-passkey" class="button primary" data-provider="${provider.name}">${input.passkeys.length === 0 ? 'Add a passkey' : 'Add another passkey'}</button></p>
<p id="add-status" role="status" class="muted"></p>
${input.passkeys.length > 0 && html`<p class="muted">Lost a device? Add a passkey on one you still have, then remove the lost one here. If you have none left, ask your administrator for a recovery code.</p>`}`
}
</section>

${
  logins.length > 0 &&
  html`<section aria-labelledby="logins">
<h2 id="logins">Your company sign-ins</h2>
<ul class="cards logins">${logins.map(
    (l) => html`<li class="card">
  <p class="card-title"><strong>${l.provider}</strong>: ${l.name}${l.current && html` <span class="tag ok">used for this session</span>`}</p>
  <p class="muted">Linked ${timeOf(l.createdAt)} · ${l.lastUsedAt === null ? 'never used to sign in' : html`last used ${timeOf(l.lastUsedAt)}`}</p>
  ${
    onlyLogin
      ? html`<p class="muted">This is your only way to sign in, so it cannot be removed. Add a passkey first.</p>`
      : html`<form method="post" action="${ACCOUNT_PATH}/logins/${l.id}/remove">
    <button type="submit" class="button danger" aria-label="Unlink ${l.provider}: ${l.name}">Unlink</button>
  </form>`
  }
</li>`,
  )}</ul>
</section>`
}

<section aria-labelledby="sessions">
<h2 id="sessions">Where you are signed in</h2>
<ul class="cards sessions">${input.sessions.map(
    (s) => html`<li class="card">
  <p class="card-title"><strong>${describeUserAgent(s.userAgent)}</strong>, from ${s.address ?? 'an unknown address'}${s.current && html` <span class="tag ok">this browser</span>`}</p>
  <p class="muted">Signed in with ${s.via ?? 'a credential since removed'} · since ${timeOf(s.createdAt)} · last active ${timeOf(s.lastUsedAt)}</p>
</li>`,
  )}</ul>
${
  others === 0
    ? html`<p class="muted">You are not signed in anywhere else.</p>`
    : html`<form method="post" action="${ACCOUNT_PATH}/sessions/revoke-others" class="actions">
  <button type="submit" class="button danger">Sign out everywhere else (${others} other ${others === 1 ? 'session' : 'sessions'})</button>
</form>`
}
</section>

<section aria-labelledby="signout">
<h2 id="signout">Sign out</h2>
<form method="post" action="${LOGOUT_PATH}" class="actions"><button type="submit" class="button">Sign out of this browser</button></form>
</section>
`;
  return renderPage({
    nonce: input.nonce,
    title: 'Your account',
    main,
    viewer,
    nav: [{ href: ACCOUNT_PATH, label: 'Your account', current: true }],
    ...(input.brand === undefined ? {} : { brand: input.brand }),
    ...(provider === undefined ? {} : { script: ACCOUNT_SCRIPT }),
  });
}
