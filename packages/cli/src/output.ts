import { writeSync } from 'node:fs';
import { currentIo } from './io.js';

/** Quoting for a printed follow-up command lives with the runtime, whose messages suggest commands too. */
export { shellQuote } from '@svc/runtime/shell-quote';

/**
 * Writes text to stdout, synchronously so that nothing is lost when the process exits right
 * after (and tests reading the pipe see it at once). Newlines are kept (help texts span lines);
 * every other control, C1 and bidi character is escaped as by {@link escapeControls}, so even
 * a printer that forgot to escape cannot send the terminal a sequence. Data lines use
 * {@link printText}, which escapes newlines too.
 *
 * @example
 * printLine(`svc auth: management API listening on ${url}`);
 */
export function printLine(line: string): void {
  writeAll(1, `${line.split('\n').map(escapeControls).join('\n')}\n`);
}

/**
 * Characters that must never reach a terminal raw: C0 controls, DEL, C1 controls, the Unicode
 * bidirectional controls (U+061C, U+200E/F, U+202A-202E, U+2066-2069) and the Unicode line and
 * paragraph separators. Raw, they let stored data (a device name, an audit event, an error
 * detail) move the cursor, recolour or clear the screen, forge a line, or reorder what is shown.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters to escape is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** The same characters, minus the C0 controls that `JSON.stringify` already escapes. */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function hex(c: string, width: number): string {
  return (c.codePointAt(0) ?? 0).toString(16).padStart(width, '0');
}

/**
 * `text` with every control, DEL, C1 and bidirectional-control character shown as a visible
 * escape: `\x1b` for ESC, `\x0a` for a newline, `\u202e` for RIGHT-TO-LEFT OVERRIDE. Every
 * printer of data goes through it (or through {@link printText}, {@link printJson} or
 * {@link printError}, which use it), so nothing stored can write into the operator's terminal.
 *
 * @example
 * escapeControls('laptop\u001b[2J'); // 'laptop\\x1b[2J'
 */
export function escapeControls(text: string): string {
  return text.replace(UNSAFE, (c) => (c.charCodeAt(0) <= 0xff ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
}

/**
 * Writes one line of data to stdout with {@link escapeControls} applied to all of it: a value
 * can neither break the line nor send the terminal a control sequence.
 *
 * @example
 * printText(`${device.id}  ${device.name}`);
 */
export function printText(line: string): void {
  printLine(escapeControls(line));
}

/**
 * Writes one line to stderr, with {@link escapeControls} applied: error messages quote
 * arguments and stored or remote data, which must not write into the terminal.
 *
 * @example
 * printError('svc auth serve: the control directory is readable by others');
 */
export function printError(line: string): void {
  writeAll(2, `${escapeControls(line)}\n`);
}

/**
 * Prints a value as one line of JSON on stdout. `JSON.stringify` escapes the C0 controls but
 * leaves DEL, the C1 controls and the bidirectional controls raw; those are written as `\uXXXX`
 * escapes too (they only occur inside strings, so the JSON means the same).
 *
 * @example
 * printJson({ device });
 */
export function printJson(value: unknown): void {
  printLine(jsonText(value));
}

/**
 * `JSON.stringify(value)` with DEL, C1 and bidirectional controls written as `\uXXXX`.
 *
 * @example
 * jsonText({ name: 'a\u202eb' }); // '{"name":"a\\u202eb"}'
 */
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(UNSAFE_IN_JSON, (c) => `\\u${hex(c, 4)}`);
}

/**
 * Thrown by a print to a standard output whose reader has gone (`svc auth audit P | head -1`):
 * the command stops there, and `svc` exits 0 without a word, as `cat` or `grep` do. Not an
 * `Error` (and so not a failure with a code of the registry): it is no failure, and it never
 * leaves `main`.
 */
export class OutputClosedError {
  readonly name = 'OutputClosedError';
  readonly message = 'standard output was closed by its reader';
}

let stdoutClosed = false;

/**
 * Whether a print found standard output closed by its reader (EPIPE): whatever the command
 * made of the {@link OutputClosedError} since, its output was no longer wanted.
 *
 * @example
 * if (outputClosed()) return 0;
 */
export function outputClosed(): boolean {
  return stdoutClosed;
}

function writeAll(fd: 1 | 2, text: string): void {
  // A run given streams of its own (`withIo`, e.g. a test running `main` in its process).
  const io = currentIo();
  if (io !== undefined) {
    io.write(fd, text);
    return;
  }
  if (fd === 1 && stdoutClosed) throw new OutputClosedError();
  const buf = Buffer.from(text, 'utf8');
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(fd, buf, off);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // A non-blocking pipe that is momentarily full: try again.
      if (code === 'EAGAIN') continue;
      if (code === 'EPIPE') {
        // Nobody reads any more: stdout stops the command; a lost stderr line is dropped.
        if (fd !== 1) return;
        stdoutClosed = true;
        throw new OutputClosedError();
      }
      throw error;
    }
  }
}

/**
 * Prints a table: a header row, then one row per item, columns padded to their widest cell and
 * separated by two spaces (the last column is not padded). Every cell goes through
 * {@link escapeControls} before it is measured, so a value cannot break the layout.
 *
 * @example
 * printTable(['ID', 'NAME'], devices.map((d) => [d.id, d.name]));
 */
export function printTable(headers: readonly string[], rows: readonly (readonly string[])[]): void {
  const cells = [headers, ...rows].map((row) => row.map(escapeControls));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  for (const row of cells) {
    printLine(
      row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    );
  }
}
