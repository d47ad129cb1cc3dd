/**
 * `value` as one shell word: unchanged when it is plain, else single-quoted, so a follow-up
 * command the CLI prints can be pasted as it is (names with spaces, quotes, `$`).
 *
 * @example
 * shellQuote('my project'); // "'my project'"
 */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}
