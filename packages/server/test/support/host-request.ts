import { request } from 'node:http';

/** An answer of {@link hostRequest}. */
export interface HostReply {
  readonly status: number;
  /** Header names lower-cased. */
  readonly headers: { get(name: string): string | null };
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  readonly body: any;
  readonly text: string;
}

/**
 * One HTTP request to `base` (a listener on this machine) that names `host` in its `Host`
 * header, which fetch never lets a caller choose: how a gateway with routes is reached at each
 * route's origin. JSON bodies are sent and parsed; the answer comes within `timeoutMs` or the
 * promise rejects saying so.
 *
 * @example
 * const r = await hostRequest(gatewayBase, 'grafana.test', 'GET', '/d/abc', { token });
 */
export function hostRequest(
  base: string,
  host: string,
  method: string,
  path: string,
  opts: { token?: string; headers?: Record<string, string>; body?: unknown; timeoutMs?: number } = {},
): Promise<HostReply> {
  const url = new URL(base);
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers: Record<string, string> = {
    host,
    ...(body === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
    ...(opts.token === undefined ? {} : { authorization: `Bearer ${opts.token}` }),
    ...(opts.headers ?? {}),
  };
  const timeoutMs = opts.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let parsed: unknown = null;
        try {
          parsed = text === '' ? null : JSON.parse(text);
        } catch {
          parsed = null;
        }
        const h = res.headers;
        resolve({
          status: res.statusCode ?? 0,
          headers: { get: (name) => (h[name.toLowerCase()] === undefined ? null : String(h[name.toLowerCase()])) },
          body: parsed,
          text,
        });
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer to ${method} ${host}${path} within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
