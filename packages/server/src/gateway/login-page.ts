import { DISPLAY_NAME_MAX_CHARS } from '@svc/core';

/** One button of the sign-in page. */
export interface LoginPageProvider {
  /** The provider module's alias: its route segment. */
  readonly name: string;
  /** `webauthn` runs its ceremony in the page's script; any other kind is a redirect ceremony (OIDC). */
  readonly kind: string;
  /** Whether it may create a new subject at first use (`:provider/jit`): a second, sign-up button. */
  readonly signup: boolean;
}

/** Escapes text for an HTML text node or a double-quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The page's only script (inline, allowed by its nonce alone). A passkey button runs the
 * ceremony with the browser's own WebAuthn JSON helpers: `begin` answers the options JSON
 * (creation options, with `user`, for a new credential; request options otherwise), the
 * browser makes or uses the credential, and `credential.toJSON()` goes to `finish`, which sets
 * the session cookies and names the page to go to. No token is ever visible to the script.
 */
const PAGE_SCRIPT = `
const returnPath = document.body.dataset.return;
const pairing = document.body.dataset.pairing;
const codeInput = document.getElementById('pairing-code');
const nameInput = document.getElementById('display-name');
const status = document.getElementById('status');
const MESSAGES = {
  user_disabled: 'Your account is not active yet: an administrator must approve it before you can sign in. Ask your administrator, then sign in again.',
};
async function post(url, body) {
  const r = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw Object.assign(new Error(MESSAGES[answer.code] || answer.detail || r.statusText), { code: answer.code });
  return answer;
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
    try {
      const begin = { intent: button.dataset.intent, return: returnPath };
      if (pairing) { begin.pairing_intent_id = pairing; begin.pairing_code = codeInput.value; }
      const options = await post(base + '/begin', begin);
      if (typeof options.redirect === 'string') { location.assign(options.redirect); return; }
      const credential = options.user
        ? await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
        : await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
      const proof = credential.toJSON();
      const done = await post(base + '/finish', displayName === '' ? proof : { ...proof, display_name: displayName });
      location.assign(done.redirect || '/');
    } catch (err) {
      status.textContent = err.code === 'user_disabled' ? err.message : 'Sign-in failed: ' + err.message;
    }
  });
}
`;

const PAGE_STYLE = `
body { font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }
h1 { font-size: 1.4rem; }
h2 { font-size: 1.1rem; }
.provider { display: block; width: 100%; box-sizing: border-box; margin: 0.5rem 0; padding: 0.7rem; font-size: 1rem;
  text-align: center; border: 1px solid #555; border-radius: 0.4rem; background: #f4f4f4; color: #111; text-decoration: none; cursor: pointer; }
#status { color: #a00; min-height: 1.5rem; }
label, #pairing-code { display: block; width: 100%; box-sizing: border-box; margin: 0.5rem 0; font-size: 1rem; }
#pairing-code { padding: 0.6rem; letter-spacing: 0.1em; }
#display-name { display: block; width: 100%; box-sizing: border-box; margin: 0.5rem 0; padding: 0.6rem; font-size: 1rem; }
.signup { margin-top: 1.5rem; padding-top: 0.5rem; border-top: 1px solid #ccc; }
.refusal { border-left: 4px solid #a00; padding: 0.2rem 0 0.2rem 0.8rem; }
.code { color: #555; font-size: 0.85rem; }
`;

/**
 * The sign-in page of the application gateway: one button per provider, and nothing from any
 * other origin. Its inline style and script carry `nonce`, the only way the page's
 * Content-Security-Policy lets them run. A redirect provider's button is a plain link to its
 * `begin` (it works without script); a passkey's runs the ceremony in the page.
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
}): string {
  const nonce = escapeHtml(input.nonce);
  if (input.pairingIntentId !== undefined) return renderPairingPage({ ...input, pairingIntentId: input.pairingIntentId }, nonce);
  const buttons = input.providers.flatMap((p) => {
    const name = escapeHtml(p.name);
    if (p.kind === 'webauthn') {
      return [
        `<button type="button" class="provider" data-provider="${name}" data-intent="signin">Sign in with a passkey (${name})</button>`,
      ];
    }
    const href = `/.svc/auth/v1/providers/${encodeURIComponent(p.name)}/begin?return=${encodeURIComponent(input.returnPath)}`;
    return [`<a class="provider" href="${escapeHtml(href)}">Sign in with ${name}</a>`];
  });
  // A new passkey makes a new user: the page asks for the name they will be known by (the
  // service checks it and keeps it as the user's own, `self`).
  const signUps = input.providers
    .filter((p) => p.kind === 'webauthn' && p.signup)
    .map((p) => {
      const name = escapeHtml(p.name);
      return `<button type="button" class="provider" data-provider="${name}" data-intent="signup">Create a passkey (${name})</button>`;
    });
  const signUp =
    signUps.length === 0
      ? ''
      : [
          '<section class="signup">',
          '<h2>New here?</h2>',
          '<label for="display-name">Your name</label>',
          `<input id="display-name" name="display_name" autocomplete="name" maxlength="${DISPLAY_NAME_MAX_CHARS}" spellcheck="false">`,
          ...signUps,
          '</section>',
        ].join('\n');
  return page(
    nonce,
    input.returnPath,
    '',
    'Sign in',
    buttons.length === 0 && signUps.length === 0 ? '<p>No sign-in method is configured.</p>' : [...buttons, signUp].join('\n'),
  );
}

/**
 * The page of a link intent an administrator prepared (`svc auth pair --provider`): the user
 * types the one-time code they were given (never in the URL) and sets up a credential with one
 * of the providers; the gateway checks the code and the provider against the intent.
 */
function renderPairingPage(
  input: { readonly returnPath: string; readonly providers: readonly LoginPageProvider[]; readonly pairingIntentId: string },
  nonce: string,
): string {
  const buttons = input.providers.map((p) => {
    const name = escapeHtml(p.name);
    const what = p.kind === 'webauthn' ? `Set up a passkey (${name})` : `Link your ${name} login`;
    return `<button type="button" class="provider" data-provider="${name}" data-intent="link">${what}</button>`;
  });
  const body = [
    '<p>Your administrator gave you a one-time code to set up a new passkey: for a new account, or to get back in after losing the device that held your passkey.</p>',
    '<p>Type the code, then create the passkey on this device. Your account page opens next: remove the lost passkey there.</p>',
    '<label for="pairing-code">Code</label>',
    '<input id="pairing-code" name="code" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" maxlength="32" required>',
    buttons.length === 0 ? '<p>No sign-in method is configured.</p>' : buttons.join('\n'),
  ].join('\n');
  return page(nonce, input.returnPath, ` data-pairing="${escapeHtml(input.pairingIntentId)}"`, 'Set up your sign-in', body);
}

/** What a browser is told when its sign-in is refused: a sentence for a person, the code for whoever helps them. */
const REFUSALS: Readonly<Record<string, { readonly title: string; readonly message: string }>> = {
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
  invalid_flow: {
    title: 'Sign-in expired',
    message: 'The sign-in took too long or was already used. Start again from the sign-in page.',
  },
};

/**
 * The page a browser gets when a sign-in that came back from an identity provider (its
 * `callback`, a top-level navigation) is refused: what happened in words, the stable code, and a
 * way back to the sign-in page. No script.
 *
 * @example
 * renderSignInRefusedPage({ nonce, code: 'user_disabled', detail: 'the user is disabled: an operator must enable them' });
 */
export function renderSignInRefusedPage(input: { readonly nonce: string; readonly code: string; readonly detail: string }): string {
  const known = REFUSALS[input.code];
  const title = known?.title ?? 'Sign-in failed';
  const message = known?.message ?? input.detail;
  return page(
    escapeHtml(input.nonce),
    '/',
    '',
    title,
    [
      `<p class="refusal">${escapeHtml(message)}</p>`,
      `<p class="code">Code: <code>${escapeHtml(input.code)}</code></p>`,
      '<a class="provider" href="/.svc/auth/v1/login">Back to the sign-in page</a>',
    ].join('\n'),
    false,
  );
}

function page(nonce: string, returnPath: string, bodyAttributes: string, title: string, content: string, script = true): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title}</title>
<style nonce="${nonce}">${PAGE_STYLE}</style>
</head>
<body data-return="${escapeHtml(returnPath)}"${bodyAttributes}>
<h1>${title}</h1>
${content}
${script ? `<p id="status" role="status"></p>\n<script nonce="${nonce}">${PAGE_SCRIPT}</script>` : ''}
</body>
</html>
`;
}
