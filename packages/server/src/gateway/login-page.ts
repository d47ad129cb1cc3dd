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
const status = document.getElementById('status');
async function post(url, body) {
  const r = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(answer.detail || r.statusText);
  return answer;
}
for (const button of document.querySelectorAll('button[data-provider]')) {
  button.addEventListener('click', async () => {
    status.textContent = '';
    const base = '/.svc/auth/v1/providers/' + encodeURIComponent(button.dataset.provider);
    try {
      const begin = { intent: button.dataset.intent, return: returnPath };
      if (pairing) { begin.pairing_intent_id = pairing; begin.pairing_code = codeInput.value; }
      const options = await post(base + '/begin', begin);
      if (typeof options.redirect === 'string') { location.assign(options.redirect); return; }
      const credential = options.user
        ? await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) })
        : await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options) });
      const done = await post(base + '/finish', credential.toJSON());
      location.assign(done.redirect || '/');
    } catch (err) {
      status.textContent = 'Sign-in failed: ' + err.message;
    }
  });
}
`;

const PAGE_STYLE = `
body { font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }
h1 { font-size: 1.4rem; }
.provider { display: block; width: 100%; box-sizing: border-box; margin: 0.5rem 0; padding: 0.7rem; font-size: 1rem;
  text-align: center; border: 1px solid #555; border-radius: 0.4rem; background: #f4f4f4; color: #111; text-decoration: none; cursor: pointer; }
#status { color: #a00; min-height: 1.5rem; }
label, #pairing-code { display: block; width: 100%; box-sizing: border-box; margin: 0.5rem 0; font-size: 1rem; }
#pairing-code { padding: 0.6rem; letter-spacing: 0.1em; }
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
      const signIn = `<button type="button" class="provider" data-provider="${name}" data-intent="signin">Sign in with a passkey (${name})</button>`;
      const signUp = `<button type="button" class="provider" data-provider="${name}" data-intent="signup">Create a passkey (${name})</button>`;
      return p.signup ? [signIn, signUp] : [signIn];
    }
    const href = `/.svc/auth/v1/providers/${encodeURIComponent(p.name)}/begin?return=${encodeURIComponent(input.returnPath)}`;
    return [`<a class="provider" href="${escapeHtml(href)}">Sign in with ${name}</a>`];
  });
  return page(
    nonce,
    input.returnPath,
    '',
    'Sign in',
    buttons.length === 0 ? '<p>No sign-in method is configured.</p>' : buttons.join('\n'),
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
    '<p>Type the code your administrator gave you, then set up your sign-in.</p>',
    '<label for="pairing-code">Code</label>',
    '<input id="pairing-code" name="code" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" maxlength="32" required>',
    buttons.length === 0 ? '<p>No sign-in method is configured.</p>' : buttons.join('\n'),
  ].join('\n');
  return page(nonce, input.returnPath, ` data-pairing="${escapeHtml(input.pairingIntentId)}"`, 'Set up your sign-in', body);
}

function page(nonce: string, returnPath: string, bodyAttributes: string, title: string, content: string): string {
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
<p id="status" role="status"></p>
<script nonce="${nonce}">${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
