import { DISPLAY_NAME_MAX_CHARS } from '@svc/core';
import { html, type SafeHtml } from '../pages/html.js';
import { DEFAULT_BRAND, type PageBrand, renderPage } from '../pages/layout.js';

export { escapeHtml } from '../pages/html.js';

/** One button of the sign-in page. */
export interface LoginPageProvider {
  /** The provider module's alias: its route segment (in URLs and data attributes, never shown). */
  readonly name: string;
  /** `webauthn` runs its ceremony in the page's script; any other kind is a redirect ceremony (OIDC). */
  readonly kind: string;
  /** Whether it may create a new subject at first use (`:provider/jit`): a second, sign-up button. */
  readonly signup: boolean;
  /** What the page calls it (`:provider/label`, "Acme SSO"), or null for a generic wording. */
  readonly label?: string | null;
}

/** Why the sign-in page is shown again to someone already signed in (step-up), in words. */
export type StepUpReason = 'recent' | 'method';

/** What a person reads for a provider: its label, else "a passkey" or "your organisation's account". Never its alias. */
export function providerWords(p: Pick<LoginPageProvider, 'kind' | 'label'>): string {
  if (p.label !== undefined && p.label !== null) return p.label;
  return p.kind === 'webauthn' ? 'a passkey' : "your organisation's account";
}

/**
 * The page's only script (inline, allowed by its nonce alone). A passkey button runs the
 * ceremony with the browser's own WebAuthn JSON helpers: `begin` answers the options JSON
 * (creation options, with `user`, for a new credential; request options otherwise), the
 * browser makes or uses the credential, and `credential.toJSON()` goes to `finish`, which sets
 * the session cookies and names the page to go to. No token is ever visible to the script.
 * A failure is told as a plain sentence with what to try next: never the browser's own text.
 */
const PAGE_SCRIPT = `
const returnPath = document.body.dataset.return;
const pairing = document.body.dataset.pairing;
const codeInput = document.getElementById('pairing-code');
const nameInput = document.getElementById('display-name');
const status = document.getElementById('status');
const MESSAGES = {
  user_disabled: 'Your account is not active yet: an administrator must approve it before you can sign in. Ask your administrator, then sign in again.',
  rate_limited: 'Too many attempts from this network. Wait a few minutes, then try again.',
  provider_unavailable: 'Sign-in with this method is unavailable for a moment. Wait a few seconds, then try again.',
  identity_provider_unavailable: 'Your organisation\\'s sign-in service is not answering. Try again in a minute.',
  invalid_credential: 'This passkey was not accepted here: it may belong to another site or account. Try another passkey, or ask your administrator.',
  invalid_flow: 'The sign-in took too long. Try again.',
  invalid_pairing: 'That code is not right, or it has expired. Check the code you were given and try again.',
  csrf_refused: 'This page is out of date. Reload it and try again.',
};
const WEBAUTHN = {
  NotAllowedError: 'The passkey request was cancelled or timed out. Try again, and confirm on your device when it asks.',
  InvalidStateError: 'This device already holds a passkey for this site. Sign in with it instead.',
  AbortError: 'The passkey request was interrupted. Try again.',
  SecurityError: 'Passkeys cannot be used at this address. Open the site at its usual address, then try again.',
  NotSupportedError: 'This browser or device cannot use passkeys. Try another browser, or a phone or security key.',
  ConstraintError: 'This device cannot make the kind of passkey this site needs. Try another device or a security key.',
  UnknownError: 'Your device could not complete the passkey request. Try again, or use another device.',
};
async function post(url, body) {
  const r = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw Object.assign(new Error(MESSAGES[answer.code] || 'The sign-in did not work. Try again; if it keeps failing, ask your administrator.'), { code: answer.code });
  return answer;
}
function explain(err) {
  if (err && WEBAUTHN[err.name]) return WEBAUTHN[err.name];
  if (err && err.code) return err.message;
  if (typeof PublicKeyCredential === 'undefined') return WEBAUTHN.NotSupportedError;
  return 'The sign-in did not work. Try again; if it keeps failing, ask your administrator.';
}
for (const button of document.querySelectorAll('button[data-provider]')) {
  button.addEventListener('click', async () => {
    status.textContent = '';
    const base = '/.svc/auth/v1/providers/' + encodeURIComponent(button.dataset.provider);
    const signup = button.dataset.intent === 'signup';
    const displayName = signup && nameInput ? nameInput.value.trim() : '';
    if (signup && nameInput && displayName === '') {
      status.textContent = 'Type your name first: it is how this site will know you.';
      nameInput.focus();
      return;
    }
    if (pairing && codeInput && codeInput.value.trim() === '') {
      status.textContent = 'Type the code you were given first.';
      codeInput.focus();
      return;
    }
    button.disabled = true;
    try {
      const begin = { intent: button.dataset.intent, return: returnPath };
      if (pairing) { begin.pairing_intent_id = pairing; begin.pairing_code = codeInput.value.trim(); }
      const options = await post(base + '/begin', begin);
      if (typeof options.redirect === 'string') { location.assign(options.redirect); return; }
      const credential = options.user
        ? await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
        : await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
      const proof = credential.toJSON();
      const done = await post(base + '/finish', displayName === '' ? proof : { ...proof, display_name: displayName });
      location.assign(done.redirect || '/');
    } catch (err) {
      status.textContent = err && err.code === 'user_disabled' ? err.message : 'Sign-in failed: ' + explain(err);
    } finally {
      button.disabled = false;
    }
  });
}
`;

/** Method names (`amr`, RFC 8176) as people read them. */
export const METHOD_WORDS: Readonly<Record<string, string>> = {
  hwk: 'a passkey',
  user: 'a passkey',
  fed: "your organisation's sign-in",
  ed25519: 'a registered device key',
};

/** "a passkey or your organisation's sign-in": the methods of an `:amr` list in words. */
export function methodsInWords(amr: readonly string[]): string {
  return [...new Set(amr.map((m) => METHOD_WORDS[m] ?? m))].join(' or ');
}

/** The words of a step-up notice. */
function stepUpNotice(reason: StepUpReason, amr: readonly string[] | null): string {
  if (reason === 'recent') return 'This page needs a recent sign-in. Sign in again to continue; you will come back to where you were.';
  return `This page needs a sign-in with ${methodsInWords(amr ?? ['hwk'])}. Sign in below to continue; you will come back to where you were.`;
}

/**
 * The sign-in page of the application gateway, in the house layout: one button per provider
 * (named by its label, never its alias), and nothing from any other origin. A redirect
 * provider's button is a plain link to its `begin` (it works without script); a passkey's runs
 * the ceremony in the page. With `stepUp`, it says why someone already signed in must sign in
 * again (only the providers that can satisfy the page are passed in).
 *
 * @example
 * renderLoginPage({ nonce, returnPath: '/app', providers: [{ name: 'passkey', kind: 'webauthn', signup: false }] });
 */
export function renderLoginPage(input: {
  readonly nonce: string;
  readonly returnPath: string;
  readonly providers: readonly LoginPageProvider[];
  /** A link intent's id (`?pairing=int_...`): the page asks for its code and offers to set up a credential. */
  readonly pairingIntentId?: string;
  readonly brand?: PageBrand;
  /** The site's name as the passkey provider knows it (`:webauthn/rp-name`), when it differs from the brand. */
  readonly siteName?: string | null;
  readonly stepUp?: StepUpReason | null;
  /** The methods the page to come back to accepts (its `:amr`), for the step-up notice. */
  readonly stepUpMethods?: readonly string[] | null;
}): string {
  const brand = input.brand ?? DEFAULT_BRAND;
  if (input.pairingIntentId !== undefined) return renderPairingPage({ ...input, brand, pairingIntentId: input.pairingIntentId });
  const buttons = input.providers.map((p) => {
    if (p.kind === 'webauthn') {
      const words = p.label === undefined || p.label === null ? 'a passkey' : p.label;
      return html`<button type="button" class="button primary block provider" data-provider="${p.name}" data-intent="signin">Sign in with ${words}</button>`;
    }
    const href = `/.svc/auth/v1/providers/${encodeURIComponent(p.name)}/begin?return=${encodeURIComponent(input.returnPath)}`;
    return html`<a class="button primary block provider" data-provider="${p.name}" href="${href}">Sign in with ${providerWords(p)}</a>`;
  });
  // A new passkey makes a new user: the page asks for the name they will be known by (the
  // service checks it and keeps it as the user's own, `self`).
  // Signing in again (step-up) is never a sign-up.
  const stepUp = input.stepUp !== undefined && input.stepUp !== null;
  const signUps = input.providers
    .filter((p) => p.kind === 'webauthn' && p.signup && !stepUp)
    .map(
      (p) =>
        html`<button type="button" class="button block provider" data-provider="${p.name}" data-intent="signup">Create a passkey${p.label === undefined || p.label === null ? '' : html` for ${p.label}`}</button>`,
    );
  const site = input.siteName ?? brand.name;
  const main = html`${
    input.stepUp !== undefined && input.stepUp !== null
      ? html`<p class="notice" id="step-up">${stepUpNotice(input.stepUp, input.stepUpMethods ?? null)}</p>`
      : html`<p>Sign in to continue to ${site}.</p>`
  }
${buttons.length === 0 && signUps.length === 0 ? html`<p>No sign-in method is configured. Ask the people who run ${site}.</p>` : buttons}
<p id="status" role="status" class="status error"></p>
${
  signUps.length > 0 &&
  html`<section class="signup" aria-labelledby="signup-title">
<h2 id="signup-title">New here?</h2>
<label for="display-name">Your name</label>
<input type="text" id="display-name" name="display_name" autocomplete="name" maxlength="${DISPLAY_NAME_MAX_CHARS}" spellcheck="false">
${signUps}
</section>`
}`;
  return renderPage({
    nonce: input.nonce,
    title: input.stepUp === undefined || input.stepUp === null ? 'Sign in' : 'Sign in again',
    main,
    brand,
    script: PAGE_SCRIPT,
    data: { return: input.returnPath, width: 'narrow' },
  });
}

/**
 * The page of a link intent an administrator prepared (`svc auth pair --provider`): the user
 * types the one-time code they were given (never in the URL) and sets up a credential with one
 * of the providers; the gateway checks the code and the provider against the intent.
 */
function renderPairingPage(input: {
  readonly nonce: string;
  readonly returnPath: string;
  readonly providers: readonly LoginPageProvider[];
  readonly pairingIntentId: string;
  readonly brand: PageBrand;
}): string {
  const buttons = input.providers.map((p) => {
    const what =
      p.kind === 'webauthn'
        ? html`Set up a passkey`
        : p.label === undefined || p.label === null
          ? html`Link your organisation's account`
          : html`Link your ${p.label} account`;
    return html`<button type="button" class="button primary block provider" data-provider="${p.name}" data-intent="link">${what}</button>`;
  });
  const main = html`<p>Your administrator gave you a one-time code to set up a new passkey: for a new account, or to get back in after losing the device that held your passkey.</p>
<p>Type the code, then create the passkey on this device. Your account page opens next: remove the lost passkey there.</p>
<label for="pairing-code">Code</label>
<input type="text" id="pairing-code" name="code" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" maxlength="32" required>
${buttons.length === 0 ? html`<p>No sign-in method is configured.</p>` : buttons}
<p id="status" role="status" class="status error"></p>`;
  return renderPage({
    nonce: input.nonce,
    title: 'Set up your sign-in',
    main,
    brand: input.brand,
    script: PAGE_SCRIPT,
    data: { return: input.returnPath, pairing: input.pairingIntentId, width: 'narrow' },
  });
}

/** What a browser is told when its sign-in (or a request) is refused: a sentence for a person. */
export const SIGN_IN_REFUSALS: Readonly<Record<string, { readonly title: string; readonly message: string }>> = {
  user_disabled: {
    title: 'Your account is not active',
    message:
      'An administrator must approve (or enable again) your account before you can sign in. Ask your administrator, then sign in again.',
  },
  invalid_credential: {
    title: 'Sign-in refused',
    message:
      'This sign-in could not be accepted: your account may not be set up here. Ask your administrator, or try another way to sign in.',
  },
  invalid_handoff: {
    title: 'This sign-in link no longer works',
    message:
      'A link that carries your sign-in from one site to another works once, for 30 seconds, and only in the browser that asked for it. Sign in again to continue.',
  },
  invalid_flow: {
    title: 'Sign-in expired',
    message: 'The sign-in took too long or was already used. Start again from the sign-in page.',
  },
};

/** A link back to the sign-in page, styled as a button. */
export function signInAgainLink(label = 'Back to the sign-in page'): SafeHtml {
  return html`<a class="button primary" href="/.svc/auth/v1/login">${label}</a>`;
}
