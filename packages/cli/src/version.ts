/** The version of `svc`. */
export const VERSION = '0.1.0';

/** The `User-Agent` of the CLI's requests: a session created by `svc auth login` records it. */
export const CLI_USER_AGENT = `svc/${VERSION} (node ${process.version})`;
