/**
 * `value` quoted for a POSIX shell when it needs quoting (spaces, quotes, `$`, globs...), so a
 * printed follow-up command can be pasted as is.
 *
 * @example
 * printText(`next: svc auth serve ${shellQuote(dir)}`); // next: svc auth serve '/tmp/my project'
 */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}
