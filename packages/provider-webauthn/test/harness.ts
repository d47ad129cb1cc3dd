// A stand-in for the service around one WebAuthn provider, so the provider is proved against a
// real browser before the gateway's routes exist: a node:http server on 127.0.0.1 serving a
// page (at http://localhost:<port>, a secure context) whose script runs the ceremonies
// through this harness's begin/finish endpoints. The harness keeps what the service keeps:
// single-use flows (state never sent to the browser), stored credentials with a counter the
// "store" keeps monotonic, and sessions. It calls the provider's begin/credentialIdOf/finish
// directly, as the service does through its ProviderHandle.
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthProvider, ProviderContext, ProviderIntent, ProviderJson, StoredCredential } from '@svc/core';

/** A flow in progress, as the service keeps it: the provider's state never leaves the server. */
interface Flow {
  readonly intent: ProviderIntent;
  readonly state: ProviderJson;
}

/** What the harness answers to a finish: a session, or the refusal with the provider's reason. */
export type FinishOutcome =
  | {
      readonly ok: true;
      readonly session: string;
      readonly subject: string;
      readonly counter: number | null;
      readonly claims: Record<string, unknown>;
    }
  | { readonly ok: false; readonly reason: string; readonly message: string };

export interface Harness {
  /** The page's origin as the browser sees it: `http://localhost:<port>`. */
  readonly origin: string;
  readonly port: number;
  /** Credentials by id, as a store keeps them (shared between harnesses to model one service on two origins). */
  readonly credentials: Map<string, StoredCredential>;
  /** Live sessions: token → credential id. */
  readonly sessions: Map<string, string>;
  /** Runs a finish straight through the harness (for replays), as if the browser had posted it. */
  finish(flowId: string, credential: ProviderJson): Promise<FinishOutcome>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly provider: AuthProvider;
  /** The module's `:config`, given the harness's own origin (known once it listens). */
  readonly config: (origin: string) => ProviderJson;
  /** Share another harness's credential store. */
  readonly credentials?: Map<string, StoredCredential>;
}

/** The sign-in page: the browser's own JSON helpers, no library. `svc` is what the tests call. */
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>svc webauthn harness</title>
<script>
async function post(path, body) {
  const r = await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
}
window.svc = {
  begin(intent) {
    return post('/begin', { intent });
  },
  // tamper.userVerification (and residentKey) model a client that ignores the relying party's policy.
  async create(optionsJson, tamper = {}) {
    const options = PublicKeyCredential.parseCreationOptionsFromJSON(optionsJson);
    if (tamper.userVerification) options.authenticatorSelection.userVerification = tamper.userVerification;
    if (tamper.residentKey) Object.assign(options.authenticatorSelection, { residentKey: tamper.residentKey, requireResidentKey: false });
    return (await navigator.credentials.create({ publicKey: options })).toJSON();
  },
  async get(optionsJson, tamper = {}) {
    const options = PublicKeyCredential.parseRequestOptionsFromJSON(optionsJson);
    if (tamper.userVerification) options.userVerification = tamper.userVerification;
    return (await navigator.credentials.get({ publicKey: options })).toJSON();
  },
  finish(flow, credential) {
    return post('/finish', { flow, credential });
  },
  // intent: 'signup' | 'link' | 'signin'.
  async ceremony(intent, tamper = {}) {
    const begun = await svc.begin(intent);
    const credential = intent === 'signin' ? await svc.get(begun.options, tamper) : await svc.create(begun.options, tamper);
    const outcome = await svc.finish(begun.flow, credential);
    return { flow: begun.flow, options: begun.options, credential, outcome };
  },
};
</script>
<p>harness</p>
`;

async function readJson(req: IncomingMessage): Promise<ProviderJson> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 256 * 1024) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as ProviderJson;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/**
 * Starts a harness on 127.0.0.1 port 0 for `provider`.
 *
 * @example
 * const h = await startHarness({ provider: createWebAuthnProvider(), config: (origin) => ({ ... 'webauthn/origins': [origin] }) });
 * await page.goto(h.origin);
 */
export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const { provider } = options;
  const flows = new Map<string, Flow>();
  const credentials = options.credentials ?? new Map<string, StoredCredential>();
  const sessions = new Map<string, string>();
  let origin = '';
  let config: ProviderJson = null;

  const ctxFor = (intent: ProviderIntent): ProviderContext => ({
    realm: 'application',
    intent,
    origin,
    callbackUrl: `${origin}/callback`,
    // A link is for the signed-in subject, who already holds every credential this harness stores.
    subject: intent === 'link' ? 'usr_harness' : null,
    existingCredentials: intent === 'link' ? [...credentials.keys()] : [],
  });

  async function finish(flowId: string, credential: ProviderJson): Promise<FinishOutcome> {
    const flow = flows.get(flowId);
    // Single use, as the service's flow consumption: taken before anything else happens.
    flows.delete(flowId);
    if (flow === undefined) return { ok: false, reason: 'unknown_flow', message: 'no such flow (finished, or never begun)' };
    const request = { query: {}, body: credential };
    const id = provider.credentialIdOf(request);
    const stored = flow.intent === 'signin' && id !== null ? (credentials.get(id) ?? null) : null;
    let result: Awaited<ReturnType<AuthProvider['finish']>>;
    try {
      result = await provider.finish(ctxFor(flow.intent), config, { state: flow.state, request, credential: stored });
    } catch (error) {
      const e = error as Error & { reason?: string };
      return { ok: false, reason: e.reason ?? 'error', message: e.message };
    }
    const cred = result.credential;
    if (cred === null) return { ok: false, reason: 'store_refused', message: 'no credential returned' };
    if (flow.intent === 'signin') {
      // The store's own counter rule, checked after the provider's (the tests tell them apart by reason).
      const before = stored?.counter ?? 0;
      const after = cred.counter ?? 0;
      if (stored === null || cred.id !== stored.id) return { ok: false, reason: 'store_refused', message: 'credential mismatch' };
      if ((after !== 0 || before !== 0) && after <= before)
        return { ok: false, reason: 'store_counter', message: 'counter did not increase' };
    } else if (credentials.has(cred.id)) return { ok: false, reason: 'store_refused', message: 'credential already linked' };
    credentials.set(cred.id, cred);
    const session = randomBytes(16).toString('base64url');
    sessions.set(session, cred.id);
    return { ok: true, session, subject: result.identity.subject, counter: cred.counter, claims: { ...result.identity.claims } };
  }

  const server: Server = createServer((req, res) => {
    void (async () => {
      try {
        if (req.method === 'GET' && req.url === '/') {
          res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
          res.end(PAGE);
          return;
        }
        if (req.method === 'POST' && req.url === '/begin') {
          const body = await readJson(req);
          const intent = (body as { intent?: unknown } | null)?.intent;
          if (intent !== 'signin' && intent !== 'signup' && intent !== 'link') return send(res, 400, { error: 'bad intent' });
          const begun = await provider.begin(ctxFor(intent), config);
          if (begun.reply.kind !== 'json') return send(res, 500, { error: 'expected a JSON reply' });
          const flow = randomBytes(16).toString('base64url');
          flows.set(flow, { intent, state: begun.state });
          return send(res, 200, { flow, options: begun.reply.body });
        }
        if (req.method === 'POST' && req.url === '/finish') {
          const body = (await readJson(req)) as { flow?: unknown; credential?: ProviderJson } | null;
          if (typeof body?.flow !== 'string' || body.credential === undefined) return send(res, 400, { error: 'bad finish' });
          return send(res, 200, await finish(body.flow, body.credential));
        }
        send(res, 404, { error: 'not found' });
      } catch (error) {
        send(res, 500, { error: (error as Error).message });
      }
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  origin = `http://localhost:${port}`;
  config = options.config(origin);
  return {
    origin,
    port,
    credentials,
    sessions,
    finish,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }),
  };
}
