import { readSync } from 'node:fs';
import { UsageError } from './cli-error.js';
import { currentIo } from './io.js';

/** Where a secret the command needs comes from, as typed: a value, `-`, or nothing. */
export interface SecretSource {
  /** What the secret is, for prompts and errors (e.g. `bootstrap token`). */
  readonly what: string;
  /** The command, for errors (e.g. `svc auth enroll`). */
  readonly command: string;
  /** How to pass it on standard input, for the error when it is missing (e.g. `- in place of <BOOTSTRAP_TOKEN>`). */
  readonly dashForm: string;
}

function readStdinLine(): string {
  // A run given a standard input of its own (`withIo`): its first line.
  const io = currentIo();
  if (io !== undefined) return (io.stdin.split('\n')[0] ?? '').replace(/\r$/, '').trim();
  const chunks: Buffer[] = [];
  const buf = Buffer.alloc(4096);
  for (;;) {
    let n: number;
    try {
      n = readSync(0, buf, 0, buf.length, null);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EAGAIN') continue;
      if (code === 'EOF') break;
      throw error;
    }
    if (n === 0) break;
    const chunk = buf.subarray(0, n);
    const nl = chunk.indexOf(0x0a);
    if (nl >= 0) {
      chunks.push(Buffer.from(chunk.subarray(0, nl)));
      break;
    }
    chunks.push(Buffer.from(chunk));
    if (chunks.reduce((a, c) => a + c.length, 0) > 16 * 1024) break;
  }
  return Buffer.concat(chunks).toString('utf8').replace(/\r$/, '').trim();
}

async function promptHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  // Echo off before the prompt shows: what is typed (or pasted) the moment it appears must not
  // be echoed by the terminal while the mode is still changing.
  stdin.setRawMode(true);
  process.stderr.write(question);
  stdin.resume();
  stdin.setEncoding('utf8');
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      const onData = (text: string): void => {
        for (const ch of text) {
          if (ch === '\r' || ch === '\n' || ch === '\u0004') {
            stdin.off('data', onData);
            resolve(value.trim());
            return;
          }
          if (ch === '\u0003') {
            stdin.off('data', onData);
            reject(new UsageError('cancelled'));
            return;
          }
          if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
          else value += ch;
        }
      };
      stdin.on('data', onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    process.stderr.write('\n');
  }
}

/**
 * A one-time secret (bootstrap token, pairing code) without it ever being in the process's
 * arguments, where any local user can read it (`/proc/PID/cmdline`, `ps`):
 * - `-`: one line from standard input; on a terminal, a prompt that does not echo;
 * - omitted: the same prompt on a terminal, else a usage error naming the `-` form;
 * - a literal value: accepted (the spec's positional form), though others can see it.
 *
 * @example
 * const token = await readSecret(positional, { what: 'bootstrap token', command: 'svc auth enroll', dashForm: '`-` in place of <BOOTSTRAP_TOKEN>' });
 */
export async function readSecret(value: string | undefined, source: SecretSource): Promise<string> {
  if (value !== undefined && value !== '-') return value;
  let secret: string;
  if (currentIo() === undefined && process.stdin.isTTY === true) secret = await promptHidden(`${source.what}: `);
  else if (value === '-') secret = readStdinLine();
  else {
    throw new UsageError(
      `${source.command}: the ${source.what} is missing; pass ${source.dashForm} and give it on standard input (it never belongs in the arguments)`,
    );
  }
  if (secret === '') throw new UsageError(`${source.command}: no ${source.what} on standard input`);
  return secret;
}
