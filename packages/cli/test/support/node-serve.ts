import { type ChildProcess, spawn } from 'node:child_process';
import { CHILD_TIMEOUT_MS, cleanEnv, SVC_BIN } from '../helpers.js';

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
export function startServe(
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; management?: boolean; node?: boolean } = {},
): Promise<ServeProcess> {
  const child = spawn(process.execPath, [SVC_BIN, ...args], { env: opts.env ?? cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let exitCode: number | null | undefined;
  const exited = new Promise<number | null>((resolve) => {
    child.on('exit', (code, signal) => {
      exitCode = code ?? (signal === null ? null : -1);
      resolve(code);
    });
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`svc did not start within ${CHILD_TIMEOUT_MS} ms\nstdout: ${out}\nstderr: ${err}`));
    }, CHILD_TIMEOUT_MS);
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const node = NODE_READY.exec(out);
      const management = MANAGEMENT_READY.exec(out);
      if ((opts.node !== false && node === null) || (opts.management === true && management === null)) return;
      clearTimeout(timer);
      resolve({
        child,
        managementUrl: management?.[1],
        nodeUrl: node?.[1] ?? '',
        stdout: () => out,
        stderr: () => err,
        async stop(signal: NodeJS.Signals = 'SIGTERM') {
          if (exitCode === undefined) child.kill(signal);
          return exited;
        },
      });
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`svc exited with ${code} before listening\nstdout: ${out}\nstderr: ${err}`));
    });
  });
}
