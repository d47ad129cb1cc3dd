import { writeSync } from 'node:fs';

/**
 * Writes one line to stdout, synchronously so that nothing is lost when the process exits
 * right after (and tests reading the pipe see it at once).
 *
 * @example
 * printLine(`svc auth: management API listening on ${url}`);
 */
export function printLine(line: string): void {
  writeAll(1, `${line}\n`);
}

/**
 * Writes one line to stderr.
 *
 * @example
 * printError('svc auth serve: the control directory is readable by others');
 */
export function printError(line: string): void {
  writeAll(2, `${line}\n`);
}

/**
 * Prints a value as one line of JSON on stdout.
 *
 * @example
 * printJson({ device });
 */
export function printJson(value: unknown): void {
  printLine(JSON.stringify(value));
}

function writeAll(fd: number, text: string): void {
  const buf = Buffer.from(text, 'utf8');
  let off = 0;
  while (off < buf.length) {
    try {
      off += writeSync(fd, buf, off);
    } catch (error) {
      // A non-blocking pipe that is momentarily full: try again.
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
    }
  }
}
