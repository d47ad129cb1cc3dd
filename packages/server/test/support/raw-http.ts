import { connect } from 'node:net';

/** A response read off a raw socket. */
export interface RawResponse {
  readonly status: number;
  /** Header names lower-cased; repeated headers joined with `, `. */
  readonly headers: Readonly<Record<string, string>>;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  readonly body: any;
  readonly text: string;
}

/**
 * Sends one HTTP/1.1 request as exact bytes (header names spelled and repeated exactly as
 * given, which fetch and node:http do not allow), with `Connection: close`, and parses the
 * answer (Content-Length or chunked body).
 */
export function rawRequest(
  port: number,
  opts: { method?: string; target: string; headers?: readonly (readonly [string, string])[]; body?: string; version?: string },
): Promise<RawResponse> {
  const lines = [`${opts.method ?? 'GET'} ${opts.target} HTTP/${opts.version ?? '1.1'}`, 'Host: 127.0.0.1', 'Connection: close'];
  for (const [name, value] of opts.headers ?? []) lines.push(`${name}: ${value}`);
  if (opts.body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(opts.body)}`);
  return rawText(port, `${lines.join('\r\n')}\r\n\r\n${opts.body ?? ''}`);
}

/**
 * Writes `request` as is and parses what comes back before the server closes. With
 * `halfClose`, the client's FIN follows the request at once (it is done sending, still reads).
 */
export function rawText(port: number, request: string, opts: { readonly halfClose?: boolean } = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: opts.halfClose === true }, () => {
      if (opts.halfClose === true) socket.end(request);
      else socket.write(request);
    });
    const parts: Buffer[] = [];
    socket.on('data', (c: Buffer) => parts.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      try {
        resolve(parseResponse(Buffer.concat(parts).toString('utf8')));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function parseResponse(all: string): RawResponse {
  let data = all;
  // Interim 1xx answers (100 Continue) come before the response.
  while (/^HTTP\/1\.1 1\d\d /.test(data) && data.includes('\r\n\r\n')) data = data.slice(data.indexOf('\r\n\r\n') + 4);
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no complete response: ${JSON.stringify(data.slice(0, 200))}`);
  const [statusLine = '', ...headerLines] = data.slice(0, end).split('\r\n');
  const status = Number(statusLine.split(' ')[1]);
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let text = data.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let out = '';
    let rest = text;
    for (;;) {
      const nl = rest.indexOf('\r\n');
      const size = Number.parseInt(rest.slice(0, nl), 16);
      if (!(size > 0)) break;
      out += rest.slice(nl + 2, nl + 2 + size);
      rest = rest.slice(nl + 2 + size + 2);
    }
    text = out;
  }
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  return { status, headers, body, text };
}
