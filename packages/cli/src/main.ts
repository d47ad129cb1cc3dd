import { ERROR_CODES, isErrorCode } from '@svc/core';
import { RuntimeError } from '@svc/runtime/errors';
import { CliError, EXIT, exitCodeOf, UsageError } from './cli-error.js';
import { COMMANDS, type CommandEntry } from './commands/index.js';
import type { SvcErrorCode } from './failure-codes.js';
import { runEnv } from './io.js';
import { jsonText, OutputClosedError, outputClosed, printError, printLine } from './output.js';
import { closest } from './suggest.js';
import { VERSION } from './version.js';

export { VERSION } from './version.js';

/** The levels `SVC_LOG_LEVEL` accepts (pino's). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function words(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (const a of argv) {
    if (a.startsWith('-')) break;
    out.push(a);
  }
  return out;
}

/** The command whose words are the longest prefix of `argv`. */
function findCommand(argv: readonly string[]): { entry: CommandEntry; rest: readonly string[] } | null {
  let best: CommandEntry | null = null;
  for (const c of COMMANDS) {
    if (c.path.length <= argv.length && c.path.every((w, i) => argv[i] === w) && (best === null || c.path.length > best.path.length)) {
      best = c;
    }
  }
  return best === null ? null : { entry: best, rest: argv.slice(best.path.length) };
}

function isGroup(prefix: readonly string[]): boolean {
  return prefix.length > 0 && COMMANDS.some((c) => c.path.length > prefix.length && prefix.every((w, i) => c.path[i] === w));
}

function printUsage(prefix: readonly string[]): void {
  const scope = prefix.length === 0 ? 'svc' : `svc ${prefix.join(' ')}`;
  printLine(
    `svc ${VERSION}: the svc service platform\n\nUsage: ${scope} <command> [options]; \`svc help <command>\` for details\n\nCommands:`,
  );
  for (const c of COMMANDS) {
    if (prefix.every((w, i) => c.path[i] === w)) printLine(`  svc ${c.path.join(' ').padEnd(22)} ${c.summary}`);
  }
  if (prefix.length === 0) {
    printLine('\nOptions:\n  -h, --help            show this help\n  -v, --version         print the version');
    printLine('\nEnvironment: SVC_LOG_LEVEL (fatal, error, warn, info, debug, trace, silent); see docs/cli.md for the rest');
  }
}

/** The commands one word below `prefix` (`svc help auth pair` lists `pair complete`). */
function printSubcommands(prefix: readonly string[]): void {
  printLine('\nSub-commands:');
  for (const c of COMMANDS) {
    if (c.path.length === prefix.length + 1 && prefix.every((w, i) => c.path[i] === w)) {
      printLine(`  svc ${c.path.join(' ').padEnd(22)} ${c.summary}`);
    }
  }
}

/** Whether the arguments ask for JSON (`--json` before any `--`): errors are then JSON too. */
function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/**
 * An error as the problem object of the contract (RFC 9457's members), on one line of stderr:
 * `status` only when the failure is an HTTP refusal; `title` is the registry's for those, else
 * the code in words.
 */
function printProblem(code: SvcErrorCode, detail: string): void {
  const http = isErrorCode(code) ? ERROR_CODES[code] : null;
  const title = http?.title ?? `${code.charAt(0).toUpperCase()}${code.slice(1).replace(/_/g, ' ')}`;
  printError(jsonText({ type: 'about:blank', title, ...(http === null ? {} : { status: http.status }), code, detail }));
}

/** One clear line for words that name no command, with the closest command when it looks like a typo. */
function unknownCommand(typed: readonly string[]): UsageError {
  let known = 0;
  while (known < typed.length && isGroup(typed.slice(0, known + 1))) known++;
  const shown = typed.slice(0, known + 1).join(' ');
  const candidates = COMMANDS.map((c) => c.path.join(' '));
  // Compare with every command and every group of the same number of words.
  const groups = new Set<string>();
  for (const c of COMMANDS) for (let n = 1; n <= c.path.length; n++) groups.add(c.path.slice(0, n).join(' '));
  let suggestion: string | null = null;
  for (let n = Math.min(typed.length, 3); n >= 1 && suggestion === null; n--) {
    const attempt = typed.slice(0, n).join(' ');
    suggestion = closest(
      attempt,
      [...groups, ...candidates].filter((g) => g.split(' ').length === n),
    );
  }
  const hint = suggestion === null ? '' : ` Did you mean \`svc ${suggestion}\`?`;
  return new UsageError(`svc: unknown command "${shown}".${hint} See \`svc --help\``);
}

function checkLogLevel(env: NodeJS.ProcessEnv): void {
  const level = env.SVC_LOG_LEVEL;
  if (level === undefined || level === '') return;
  if (!(LOG_LEVELS as readonly string[]).includes(level)) {
    throw new UsageError(`svc: SVC_LOG_LEVEL="${level}" is not a log level; use one of ${LOG_LEVELS.join(', ')}`);
  }
}

/**
 * Runs `svc` with `argv` (the arguments after the program name) and resolves to the exit code:
 * 0 ok, 1 failure, 2 usage error. Failures are printed on stderr as one clear line.
 *
 * @example
 * process.exitCode = await main(process.argv.slice(2));
 */
export async function main(argv: readonly string[]): Promise<number> {
  let prefix = 'svc';
  try {
    const first = argv[0];
    if (first === undefined || first === '--help' || first === '-h') {
      printUsage([]);
      return EXIT.ok;
    }
    if (first === '--version' || first === '-v' || first === '-V') {
      printLine(VERSION);
      return EXIT.ok;
    }
    checkLogLevel(runEnv());
    if (first === 'help') {
      // `svc help auth`, `svc help auth init`: the same as `--help` on those words.
      const asked = argv.slice(1);
      if (asked.length === 0) {
        printUsage([]);
        return EXIT.ok;
      }
      const found = findCommand(asked);
      if (found !== null && found.rest.length === 0) {
        // `svc help auth pair`: the command's own options, then the commands under it.
        const code = await (await found.entry.load()).run(['--help']);
        if (isGroup(asked)) printSubcommands(asked);
        return code;
      }
      if (isGroup(asked)) {
        printUsage(asked);
        return EXIT.ok;
      }
      throw unknownCommand(asked);
    }
    const typed = words(argv);
    const found = findCommand(argv);
    if (found === null) {
      // `svc auth`, `svc auth --help`: the group's commands.
      if (isGroup(typed)) {
        printUsage(typed);
        return EXIT.ok;
      }
      throw unknownCommand(typed);
    }
    prefix = `svc ${found.entry.path.join(' ')}`;
    const command = await found.entry.load();
    try {
      return await command.run(found.rest);
    } catch (error) {
      // `svc auth devices remvoe dev_...`: a typo of a sub-command reads as a stray argument.
      const sub = found.rest[0];
      if (error instanceof UsageError && sub !== undefined && !sub.startsWith('-') && isGroup(found.entry.path)) {
        const subs = COMMANDS.filter(
          (c) => c.path.length === found.entry.path.length + 1 && found.entry.path.every((w, i) => c.path[i] === w),
        );
        if (
          closest(
            sub,
            subs.map((c) => c.path.at(-1) ?? ''),
          ) !== null
        )
          throw unknownCommand([...found.entry.path, sub]);
      }
      throw error;
    }
  } catch (error) {
    // The reader of stdout went away (`| head -1`): what failed since is of no interest to it.
    if (error instanceof OutputClosedError || outputClosed()) return EXIT.ok;
    const json = wantsJson(argv);
    const failure = error instanceof RuntimeError ? fromRuntime(error) : error;
    if (failure instanceof CliError) {
      const message = failure.message.startsWith('svc') ? failure.message : `${prefix}: ${failure.message}`;
      if (json) {
        printProblem(failure.code, [...failure.details, message].join('; '));
        return failure.exitCode;
      }
      for (const line of failure.details) printError(line);
      printError(message);
      return failure.exitCode;
    }
    const e = error as Error;
    // One line for the user; the stack only when asked for (SVC_LOG_LEVEL=debug).
    const detail = runEnv().SVC_LOG_LEVEL === 'debug' ? (e?.stack ?? String(error)) : (e?.message ?? String(error)).split('\n')[0];
    if (json) printProblem('internal_error', `${prefix}: unexpected error (a bug, please report it): ${detail}`);
    else printError(`${prefix}: unexpected error (a bug, please report it): ${detail}`);
    return EXIT.failure;
  }
}

/**
 * A refusal of the runtime as the CLI reports it: its message, details and code as they are,
 * the exit code of its code (from the registry: the runtime's table registers its codes).
 */
function fromRuntime(error: RuntimeError): CliError {
  const code = error.code as SvcErrorCode;
  return new CliError(error.message, {
    code,
    exitCode: exitCodeOf(code),
    details: error.details,
    cause: error,
  });
}
