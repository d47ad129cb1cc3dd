import { CliError, EXIT, UsageError } from './cli-error.js';
import type { Command } from './command.js';
import { COMMANDS } from './commands/index.js';
import { printError, printLine } from './output.js';

/** The version of `svc`. */
export const VERSION = '0.1.0';

function findCommand(argv: readonly string[]): { command: Command; rest: readonly string[] } | null {
  let best: Command | null = null;
  for (const c of COMMANDS) {
    if (c.path.length <= argv.length && c.path.every((w, i) => argv[i] === w) && (best === null || c.path.length > best.path.length)) {
      best = c;
    }
  }
  return best === null ? null : { command: best, rest: argv.slice(best.path.length) };
}

function printUsage(prefix: readonly string[]): void {
  printLine(
    `svc ${VERSION}: the svc service platform\n\nUsage: svc <command> [options]; \`svc <command> --help\` for details\n\nCommands:`,
  );
  for (const c of COMMANDS) {
    if (prefix.every((w, i) => c.path[i] === w)) printLine(`  svc ${c.path.join(' ').padEnd(22)} ${c.summary}`);
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
    if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
      printUsage([]);
      return first === undefined ? EXIT.usage : EXIT.ok;
    }
    if (first === '--version' || first === '-V') {
      printLine(VERSION);
      return EXIT.ok;
    }
    const found = findCommand(argv);
    if (found === null) {
      const group = argv.filter((a) => !a.startsWith('-'));
      if (group.length <= 1 && COMMANDS.some((c) => c.path[0] === group[0])) {
        printUsage(group);
        return argv.includes('--help') || argv.includes('-h') ? EXIT.ok : EXIT.usage;
      }
      throw new UsageError(
        `svc: unknown command \`${argv
          .filter((a) => !a.startsWith('-'))
          .slice(0, 2)
          .join(' ')}\`; see \`svc --help\``,
      );
    }
    prefix = `svc ${found.command.path.join(' ')}`;
    return await found.command.run(found.rest);
  } catch (error) {
    if (error instanceof CliError) {
      for (const line of error.details) printError(line);
      printError(error.message.startsWith('svc') ? error.message : `${prefix}: ${error.message}`);
      return error.exitCode;
    }
    const e = error as Error;
    // One line for the user; the stack only when asked for (SVC_LOG_LEVEL=debug).
    const detail = process.env.SVC_LOG_LEVEL === 'debug' ? (e?.stack ?? String(error)) : (e?.message ?? String(error)).split('\n')[0];
    printError(`${prefix}: unexpected error (a bug, please report it): ${detail}`);
    return EXIT.failure;
  }
}
