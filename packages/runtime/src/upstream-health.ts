import { connect } from 'node:net';

/** How long one probe of an upstream may take: the console page never waits longer for it. */
export const UPSTREAM_PROBE_TIMEOUT_MS = 1_000;
/** How long a probe's answer is reused (a console refresh does not open a connection per route each time). */
export const UPSTREAM_PROBE_CACHE_MS = 5_000;

/**
 * A bounded health probe of the gateway's upstreams: a TCP connect to the origin's host and port,
 * given at most {@link UPSTREAM_PROBE_TIMEOUT_MS}, its answer cached {@link UPSTREAM_PROBE_CACHE_MS}
 * per origin (concurrent callers share one probe). Answers `reachable (N ms)` or
 * `unreachable: <why>`; never throws, never hangs.
 *
 * @example
 * const probe = upstreamProber();
 * await probe('http://127.0.0.1:3000'); // 'reachable (1 ms)'
 */
export function upstreamProber(
  opts: { readonly timeoutMs?: number; readonly cacheMs?: number; readonly now?: () => number } = {},
): (origin: string) => Promise<string> {
  const timeoutMs = opts.timeoutMs ?? UPSTREAM_PROBE_TIMEOUT_MS;
  const cacheMs = opts.cacheMs ?? UPSTREAM_PROBE_CACHE_MS;
  const now = opts.now ?? Date.now;
  const cache = new Map<string, { readonly at: number; readonly answer: Promise<string> }>();
  const probe = (origin: string): Promise<string> => {
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return Promise.resolve('unreachable: not a URL');
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const started = now();
    return new Promise((resolve) => {
      const socket = connect({ host, port });
      const done = (answer: string) => {
        clearTimeout(timer);
        socket.destroy();
        resolve(answer);
      };
      const timer = setTimeout(() => done(`unreachable: no connection within ${timeoutMs} ms`), timeoutMs);
      socket.once('connect', () => done(`reachable (${Math.max(0, now() - started)} ms)`));
      socket.once('error', (err: NodeJS.ErrnoException) => done(`unreachable: ${err.code ?? err.message}`));
    });
  };
  return (origin) => {
    const hit = cache.get(origin);
    if (hit !== undefined && now() - hit.at < cacheMs) return hit.answer;
    const answer = probe(origin);
    cache.set(origin, { at: now(), answer });
    return answer;
  };
}
