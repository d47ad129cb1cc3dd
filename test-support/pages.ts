// Pages are looked at, not only asserted: every page test saves a screenshot under
// docs/screenshots/ (where the README and docs show them, and where a person judges them), and
// runs axe-core inside the page, failing on any serious or critical accessibility violation.
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { REPO_ROOT } from './repo.js';

/** Where page screenshots go: `docs/screenshots/` (`SVC_TEST_SCREENSHOTS` overrides it). */
export const SCREENSHOTS_DIR = process.env.SVC_TEST_SCREENSHOTS ?? join(REPO_ROOT, 'docs', 'screenshots');

const require = createRequire(import.meta.url);
let axeSource: string | null = null;

/** One axe-core finding of a serious or critical impact. */
export interface AccessibilityViolation {
  readonly id: string;
  readonly impact: string;
  readonly help: string;
  readonly targets: readonly string[];
}

/**
 * The serious and critical accessibility violations axe-core finds in the page as it is now
 * (WCAG 2.1 A and AA rules). axe runs through the DevTools protocol, which the page's CSP does
 * not govern, so the page needs no script allowance for it.
 *
 * @example
 * assert.deepEqual(await accessibilityViolations(page), []);
 */
export async function accessibilityViolations(page: Page): Promise<AccessibilityViolation[]> {
  axeSource ??= readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(`${axeSource}\n;undefined`);
  const result = (await page.evaluate(`axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } })
    .then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => String(n.target)) })))`)) as AccessibilityViolation[];
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/**
 * Saves a full-page screenshot as `docs/screenshots/<name>.png` and asserts that axe-core finds
 * no serious or critical violation; then once more at 360 px wide (`<name>-narrow.png`), since
 * pages must stay readable on a phone. Returns the screenshot's path.
 *
 * @example
 * await checkPage(page, 'gateway-refusal-403');
 */
export async function checkPage(page: Page, name: string, options: { readonly narrow?: boolean } = {}): Promise<string> {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name)) throw new Error(`screenshot names are kebab-case: ${name}`);
  mkdirSync(SCREENSHOTS_DIR, { recursive: true });
  const file = join(SCREENSHOTS_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const violations = await accessibilityViolations(page);
  if (violations.length > 0) {
    throw new Error(`${name}: accessibility violations (serious or critical): ${JSON.stringify(violations, null, 2)}`);
  }
  if (options.narrow !== false) {
    const size = page.viewportSize();
    await page.setViewportSize({ width: 360, height: 780 });
    try {
      await page.screenshot({ path: join(SCREENSHOTS_DIR, `${name}-narrow.png`), fullPage: true });
      const overflow = await page.evaluate('document.documentElement.scrollWidth > document.documentElement.clientWidth + 1');
      if (overflow === true) throw new Error(`${name}: the page scrolls sideways at 360 px wide`);
    } finally {
      if (size !== null) await page.setViewportSize(size);
    }
  }
  return file;
}
