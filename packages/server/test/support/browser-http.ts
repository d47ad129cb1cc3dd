// Requests as a browser makes them to the gateway: cookies in a Cookie header, no redirects followed.
import type { GatewayTarget } from './gateway-harness.js';
import { api } from './harness.js';

/** A browser's request: `cookies` as a `Cookie` header, no `Authorization` unless given. */
export async function browserRequest(
  h: GatewayTarget,
  method: string,
  path: string,
  opts: { cookies?: Record<string, string>; headers?: Record<string, string>; body?: string } = {},
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
): Promise<{ status: number; headers: Headers; setCookies: string[]; body: any; text: string }> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  const jar = Object.entries(opts.cookies ?? {});
  if (jar.length > 0) headers.cookie = [headers.cookie, ...jar.map(([k, v]) => `${k}=${v}`)].filter(Boolean).join('; ');
  if (h.injected === true && h.gateway !== undefined) {
    // Through inject (the harness has no socket): a redirect is never followed there either.
    const r = await api({ base: h.gatewayBase, app: h.gateway, injected: true }, method, path, {
      headers,
      ...(opts.body === undefined ? {} : { rawBody: opts.body }),
    });
    return { ...r, setCookies: r.headers.getSetCookie() };
  }
  const res = await fetch(h.gatewayBase + path, {
    method,
    headers,
    redirect: 'manual',
    ...(opts.body === undefined ? {} : { body: opts.body }),
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: res.status, headers: res.headers, setCookies: res.headers.getSetCookie(), body, text };
}

/** The `name=value` cookies a response sets (value '' when deleted). */
export function cookiesSet(setCookies: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of setCookies) {
    const first = c.split(';', 1)[0] as string;
    const eq = first.indexOf('=');
    out[first.slice(0, eq)] = first.slice(eq + 1);
  }
  return out;
}
