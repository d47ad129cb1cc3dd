/** A `svc` command: its words (e.g. `['auth', 'init']`), a one-line summary and its runner. */
export interface Command {
  readonly path: readonly string[];
  readonly summary: string;
  /** Runs with the arguments after the command words; resolves to the exit code. */
  run(argv: readonly string[]): Promise<number>;
}

/** Options every command that takes a `<PROJECT>` accepts. */
export const PROJECT_OPTIONS = {
  profile: { type: 'string' },
} as const;

/** The help line of {@link PROJECT_OPTIONS}. */
export const PROJECT_HELP = '--profile NAME        the profile of project.edn to apply (default: $SVC_PROFILE)';
