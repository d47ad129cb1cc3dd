// Server-rendered HTML for every page the service shows (gateway sign-in, refusals, the
// account page, the management console): a tagged template that escapes every interpolated
// value unless it is already markup made by this same template. Escaping by default is the one
// property that matters for pages that show names, emails and group names a user or a directory
// chose; a template engine or JSX renderer adds a build step and, for the JSX-to-string ones, an
// opt-in escape (`safe`) that is easy to forget. Markup is only ever built here.

/** Markup made by {@link html} (or a constant passed through {@link trustedMarkup}): never escaped again. */
export class SafeHtml {
  readonly #text: string;
  constructor(text: string) {
    this.#text = text;
  }
  toString(): string {
    return this.#text;
  }
}

/**
 * Escapes text for an HTML text node or a quoted attribute value.
 *
 * @example
 * escapeHtml('<b>"Zoë"</b>'); // '&lt;b&gt;&quot;Zoë&quot;&lt;/b&gt;'
 */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** A value {@link html} accepts: text (escaped), numbers, markup, lists of these, or nothing (`null`, `undefined`, `false`). */
export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false || value === true) return '';
  if (value instanceof SafeHtml) return value.toString();
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/**
 * Builds markup: every interpolated value is escaped unless it is itself `html` markup; lists are
 * joined; `null`, `undefined` and booleans render nothing (so `${cond && html`...`}` works).
 *
 * @example
 * html`<p class="who">${user.name}</p>${groups.map((g) => html`<li>${g}</li>`)}`;
 */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  for (let i = 0; i < values.length; i++) out += render(values[i] as HtmlValue) + (strings[i + 1] ?? '');
  return new SafeHtml(out);
}

/**
 * Constant markup written in this repository (a stylesheet, an inline script body) passed through
 * unescaped. Never call it with anything a request, a user, a provider or the store supplied.
 *
 * @example
 * html`<style nonce="${nonce}">${trustedMarkup(PAGE_STYLE)}</style>`;
 */
export function trustedMarkup(constant: string): SafeHtml {
  return new SafeHtml(constant);
}
