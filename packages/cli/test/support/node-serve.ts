import type { ChildProcess } from 'node:child_process';
import { startUntilReady } from '../helpers.js';

/** A `svc serve` / `svc node serve` child process and the URLs its ready lines printed. */
export interface ServeProcess {
  readonly child: ChildProcess;
  /** The management API URL, when it runs one. */
  readonly managementUrl: string | undefined;
  /** The node surface URL (empty when it was not waited for). */
  readonly nodeUrl: string;
  stdout(): string;
  stderr(): string;
  /** Sends `signal` and resolves with the exit code once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const MANAGEMENT_READY = /svc auth: management API listening on (http:\/\/\S+)/;
const NODE_READY = /svc node: node surface listening on (http:\/\/\S+)/;

/**
 * Starts `svc <args>` and resolves once it has printed the node surface's ready line (unless
 * `node` is false) and, when `management` is true, the management API's; rejects with its
 * output when it exits first.
 */
export async function startServe(
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; management?: boolean; node?: boolean } = {},
): Promise<ServeProcess> {
  const started = await startUntilReady(
    args,
    (out) => {
      const node = NODE_READY.exec(out);
      const management = MANAGEMENT_READY.exec(out);
      if ((opts.node !== false && node === null) || (opts.management === true && management === null)) return null;
      return { managementUrl: management?.[1], nodeUrl: node?.[1] ?? '' };
    },
    opts,
  );
  return { ...started.ready, child: started.child, stdout: started.stdout, stderr: started.stderr, stop: started.stop };
}
