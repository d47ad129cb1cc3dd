import { readFileSync } from 'node:fs';

/**
 * The version of `svc`: the `version` of this package's package.json (one directory above
 * both `src/` and `dist/`), so a release bumps it in one place.
 */
export const VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;

/** The `User-Agent` of the CLI's requests: a session created by `svc auth login` records it. */
export const CLI_USER_AGENT = `svc/${VERSION} (node ${process.version})`;
