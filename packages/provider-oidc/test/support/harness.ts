// Plays the service's side of a redirect ceremony until the gateway routes exist: `/start`
// calls the provider's begin and redirects, keeping the flow state server-side keyed by a
// cookie (single use, as the service's flows are); `/callback` takes that state and calls
// finish with the callback's query, then shows the identity, or the refusal.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthProvider, ProviderContext, ProviderJson } from '@svc/core';

/** A callback the harness took without finishing (`capture` mode): what the service would hold. */
export interface CapturedCallback {
  readonly query: Record<string, string>;
  readonly state: ProviderJson;
}

/** A running harness. */
export interface Harness {
  readonly origin: string;
  readonly callbackUrl: string;
  readonly startUrl: string;
  /** The context the harness gives the provider (the service's, in production). */
  readonly ctx: ProviderContext;
  /**
   * `finish` (default) runs the provider's finish; `capture` takes the flow and records the
   * callback, for tests that then act as the service or an attacker; `hold` records the callback
   * and leaves the flow waiting, as if an attacker had held the redirect before it arrived.
   */
  mode: 'finish' | 'capture' | 'hold';
  /** The provider config used by begin and finish; tests may swap it. */
  config: ProviderJson;
  readonly captured: CapturedCallback[];
  /** The number of flows still waiting for their callback. */
  pendingFlows(): number;
  close(): Promise<void>;
}

const FLOW_COOKIE = 'svc-flow';

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * Starts the harness on 127.0.0.1 port 0.
 *
 * @example
 * const harness = await startHarness(createOidcProvider(), config);
 * await page.goto(harness.startUrl);
 */
export async function startHarness(provider: AuthProvider, config: ProviderJson): Promise<Harness> {
  const flows = new Map<string, ProviderJson>();
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const ctx: ProviderContext = {
    realm: 'application',
    intent: 'signin',
    origin,
    callbackUrl: `${origin}/callback`,
    subject: null,
    existingCredentials: [],
  };
  const harness: Harness = {
    origin,
    callbackUrl: ctx.callbackUrl,
    startUrl: `${origin}/start`,
    ctx,
    mode: 'finish',
    config,
    captured: [],
    pendingFlows: () => flows.size,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const page = (status: number, body: string) => ({ status, body: `<!doctype html><title>harness</title>${body}` });

  async function handle(
    method: string,
    url: URL,
    cookie: string | undefined,
  ): Promise<{ status: number; body: string; headers?: Record<string, string> }> {
    if (method === 'GET' && url.pathname === '/start') {
      const { state, reply } = await provider.begin(ctx, harness.config);
      if (reply.kind !== 'redirect') return page(500, '<p id="refused">begin did not redirect</p>');
      const flowId = randomBytes(16).toString('base64url');
      flows.set(flowId, state);
      return {
        status: 302,
        body: '',
        headers: { location: reply.location, 'set-cookie': `${FLOW_COOKIE}=${flowId}; Path=/; HttpOnly; SameSite=Lax` },
      };
    }
    if (method === 'GET' && url.pathname === '/callback') {
      const flowId = /(?:^|;\s*)svc-flow=([A-Za-z0-9_-]+)/.exec(cookie ?? '')?.[1];
      const state = flowId === undefined ? undefined : flows.get(flowId);
      const query = Object.fromEntries(url.searchParams);
      if (harness.mode === 'hold') {
        harness.captured.push({ query, state: state ?? null });
        return page(200, '<p id="held">held</p>');
      }
      // Single use, as the service's flows: taken before finish runs, whatever finish says.
      if (flowId !== undefined) flows.delete(flowId);
      if (state === undefined) return page(400, '<p id="refused">no_flow: no flow in progress for this browser</p>');
      if (harness.mode === 'capture') {
        harness.captured.push({ query, state });
        return page(200, '<p id="captured">captured</p>');
      }
      try {
        const { identity } = await provider.finish(ctx, harness.config, { state, request: { query, body: null }, credential: null });
        return page(200, `<pre id="identity">${escapeHtml(JSON.stringify(identity))}</pre>`);
      } catch (error) {
        const e = error as { code?: string; message?: string };
        return page(400, `<p id="refused">${escapeHtml(`${e.code ?? 'error'}: ${e.message ?? String(error)}`)}</p>`);
      }
    }
    return page(404, '<p>not found</p>');
  }

  server.on('request', (req, res) => {
    handle(req.method ?? 'GET', new URL(req.url ?? '/', origin), req.headers.cookie).then(
      ({ status, body, headers }) => res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(body),
      (error: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`harness error: ${(error as Error).message}`),
    );
  });
  return harness;
}
