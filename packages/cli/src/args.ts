import { type ParseArgsConfig, parseArgs } from 'node:util';
import { UsageError } from './cli-error.js';
import { printLine } from './output.js';
import { closest } from './suggest.js';

type Options = NonNullable<ParseArgsConfig['options']>;

/** How a command is called: its name, usage text, options and positional arguments. */
export interface CommandSpec<O extends Options> {
  /** E.g. `svc auth init`. */
  readonly name: string;
  /** One line saying what the command does. */
  readonly summary: string;
  /** The synopsis, e.g. `svc auth init <PROJECT> [--json] [--recover]`. */
  readonly usage: string;
  /** Lines describing options and arguments, printed by `--help`. */
  readonly help: readonly string[];
  readonly options: O;
  /** Names of the positional arguments, in order; all required unless `optional` lists them. */
  readonly positionals: readonly string[];
  readonly optionalPositionals?: number;
}

const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * Parses a command's arguments with `node:util` `parseArgs`. Prints the help and returns null
 * for `--help`; throws a {@link UsageError} (exit 2) for anything malformed.
 *
 * @example
 * const args = parseCommandArgs(spec, argv);
 * if (args === null) return 0;
 */
export function parseCommandArgs<O extends Options>(
  spec: CommandSpec<O>,
  argv: readonly string[],
): {
  values: ReturnType<typeof parseArgs<{ options: O & typeof HELP_OPTION; allowPositionals: true; strict: true }>>['values'];
  positionals: string[];
} | null {
  let parsed: ReturnType<typeof parseArgs<{ options: O & typeof HELP_OPTION; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: [...argv], options: { ...spec.options, ...HELP_OPTION }, allowPositionals: true, strict: true });
  } catch (error) {
    throw new UsageError(`${spec.name}: ${describeParseError(error as Error, spec.options)}; see \`${spec.name} --help\``);
  }
  if ((parsed.values as Record<string, unknown>).help === true) {
    printHelp(spec);
    return null;
  }
  const min = spec.positionals.length - (spec.optionalPositionals ?? 0);
  const count = parsed.positionals.length;
  if (count < min || count > spec.positionals.length) {
    const expected = spec.positionals.map((p) => `<${p}>`).join(' ');
    throw new UsageError(
      `${spec.name}: expected ${expected || 'no arguments'}, got ${count} argument${count === 1 ? '' : 's'}; usage: ${spec.usage}`,
    );
  }
  // `svc auth init ""` must not quietly mean the current directory (resolve('') is the cwd).
  const empty = parsed.positionals.indexOf('');
  if (empty !== -1) {
    const name = count === spec.positionals.length ? spec.positionals[empty] : undefined;
    const what = name === undefined ? 'an argument is empty' : `<${name}> is empty`;
    const fix = name === 'PROJECT' ? '; give the project directory (`.` for this one)' : '';
    throw new UsageError(`${spec.name}: ${what}${fix}; usage: ${spec.usage}`);
  }
  return { values: parsed.values, positionals: parsed.positionals };
}

/**
 * Prints a command's help on stdout.
 *
 * @example
 * printHelp(spec);
 */
export function printHelp<O extends Options>(spec: CommandSpec<O>): void {
  printLine(`${spec.summary}\n\nUsage: ${spec.usage}\n`);
  for (const line of spec.help) printLine(`  ${line}`);
  printLine('  -h, --help            show this help');
}

/**
 * A required option's value, or a usage error (exit 2) naming it.
 *
 * @example
 * const key = requireOption(args.values.key, '--key FILE', 'svc auth login');
 */
export function requireOption(value: string | undefined, flag: string, command: string): string {
  if (value === undefined || value === '') throw new UsageError(`${command}: ${flag} is required; see \`${command} --help\``);
  return value;
}

/** `parseArgs`' first line, with the closest real option when an unknown one looks like a typo. */
function describeParseError(error: Error, options: Options): string {
  const line = (error.message.split('\n')[0] ?? '').replace(/\. To specify a positional argument.*$/, '');
  const unknown = /^Unknown option '(-{1,2}[^']*)'/.exec(line)?.[1];
  if (unknown === undefined) return line;
  const flags = ['--help', ...Object.keys(options).map((o) => `--${o}`)];
  const near = closest(unknown.split('=')[0] ?? unknown, flags);
  return `unknown option "${unknown}"${near === null ? '' : ` (did you mean ${near}?)`}`;
}
