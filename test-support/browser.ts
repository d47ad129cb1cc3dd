// A real browser for the tests whose client is a browser (passkeys, OIDC login): Debian's
// Chromium driven by playwright-core over CDP. `.ci/run` installs `chromium` when it is missing.
import { existsSync } from 'node:fs';
import { type Browser, type BrowserContext, type CDPSession, chromium, type Page } from 'playwright-core';

/** Where Debian's `chromium` package puts the browser; `SVC_TEST_CHROMIUM` overrides it. */
export const CHROMIUM_PATH = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';

/**
 * Launches headless Chromium (no sandbox: CI runs as root; no background networking: the
 * machine has no network beyond the registries). Fails loudly when the browser is missing,
 * so a browser test can never pass by not running.
 *
 * @example
 * const browser = await launchBrowser();
 * try { const page = await browser.newPage(); await page.goto(url); } finally { await browser.close(); }
 */
export async function launchBrowser(extraArgs: readonly string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`no Chromium at ${CHROMIUM_PATH}: install Debian's chromium package (.ci/run does) or set SVC_TEST_CHROMIUM`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    // `extraArgs`: e.g. `--host-resolver-rules=MAP *.test:80 127.0.0.1:<port>` for host names on loopback.
    args: ['--no-sandbox', '--disable-background-networking', ...extraArgs],
  });
}

/** A page with a CTAP2 virtual authenticator (resident keys, user verification) attached over CDP. */
export interface AuthenticatorPage {
  readonly context: BrowserContext;
  readonly page: Page;
  readonly cdp: CDPSession;
  readonly authenticatorId: string;
}

/**
 * Opens a fresh context and page with a virtual platform authenticator that says yes to
 * user presence and verification, as a passkey-capable device would.
 *
 * @example
 * const { page, cdp, authenticatorId } = await pageWithAuthenticator(browser);
 * const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
 */
export async function pageWithAuthenticator(browser: Browser): Promise<AuthenticatorPage> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const authenticatorId = await addAuthenticator(cdp);
  return { context, page, cdp, authenticatorId };
}

/**
 * Adds a virtual authenticator to the page behind `cdp`: a passkey-capable platform one (CTAP2,
 * resident keys, user verification that says yes), with `overrides` for the odd one a test needs
 * (a backup-eligible one, a security key that cannot verify users). Returns its id.
 *
 * @example
 * const id = await addAuthenticator(cdp, { defaultBackupEligibility: true, defaultBackupState: false });
 */
export async function addAuthenticator(cdp: CDPSession, overrides: Record<string, unknown> = {}): Promise<string> {
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
      ...overrides,
    },
  });
  return authenticatorId;
}
