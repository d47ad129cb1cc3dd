// The confined side of a provider host: the entry file of the child process that
// `startProviderHost` spawns under Node's permission model. It may import NOTHING but Node
// built-ins: the child may read only the provider's package, its dependencies and this one
// file, so an import of @svc/core (or of anything else of the service) would be refused.
//
// Protocol: newline-delimited JSON. stdin carries the service's requests, stdout the answers:
//   -> {"id": 1, "op": "init", "entry": "file:///…/index.mjs", "exportName": "default", "config": {…}}
//   <- {"id": 1, "ok": true, "value": {"kind": "webauthn"}}  or  {"id": 1, "ok": false, "refused": ["…"]}
//   -> {"id": 2, "op": "begin", "args": [ctx]}
//   <- {"id": 2, "ok": true, "value": {…}}  or  {"id": 2, "ok": false, "error": "…", "code"?: "discovery_failed"}
// The parent checks every answer; nothing here is trusted by it. The configuration (with its
// secrets resolved) arrives on stdin, never in the arguments or the environment.
import { createInterface } from 'node:readline';

/** The contract version this host speaks (PROVIDER_CONTRACT_VERSION of @svc/core; a test keeps them equal). */
const CONTRACT_VERSION = 1;
const MAX_ERROR_CHARS = 500;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
interface Provider {
  contractVersion: number;
  kind: string;
  validateConfig(config: Json): unknown;
  begin(ctx: Json, config: Json): Promise<unknown>;
  credentialIdOf(request: Json): unknown;
  finish(ctx: Json, config: Json, input: Json): Promise<unknown>;
  health(config: Json): Promise<unknown>;
}

// Keep the real stdout for the protocol, then send everything else written to stdout (a
// provider's console.log) to stderr, so a chatty provider cannot corrupt its own channel.
const protocolWrite = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr) as typeof process.stdout.write;

function send(message: Record<string, unknown>): void {
  let line: string;
  try {
    line = JSON.stringify(message);
  } catch (err) {
    line = JSON.stringify({ id: message.id, ok: false, error: `the answer is not JSON: ${describe(err)}` });
  }
  protocolWrite(`${line}\n`);
}

/** The error's own stable `code` (e.g. the OIDC provider's `discovery_failed`), when it is a short identifier. */
function codeOf(err: unknown): { code?: string } {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[a-z][a-z0-9_]{0,63}$/.test(code) ? { code } : {};
}

function describe(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)}…` : text;
}

function isProvider(value: unknown): value is Provider {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  return (
    p.contractVersion === CONTRACT_VERSION &&
    typeof p.kind === 'string' &&
    ['validateConfig', 'begin', 'credentialIdOf', 'finish', 'health'].every((name) => typeof p[name] === 'function')
  );
}

let provider: Provider | null = null;
let config: Json = null;

async function init(id: number, entry: string, exportName: string, cfg: Json): Promise<void> {
  let mod: Record<string, unknown>;
  try {
    mod = (await import(entry)) as Record<string, unknown>;
  } catch (err) {
    send({ id, ok: false, refused: [`the package's entry could not be loaded: ${describe(err)}`] });
    return;
  }
  const candidate = mod[exportName];
  if (!isProvider(candidate)) {
    send({
      id,
      ok: false,
      refused: [
        `the export ${exportName} is not an AuthProvider of contract version ${CONTRACT_VERSION} (contractVersion, kind, validateConfig, begin, credentialIdOf, finish, health)`,
      ],
    });
    return;
  }
  let problems: unknown;
  try {
    problems = candidate.validateConfig(cfg);
  } catch (err) {
    send({ id, ok: false, refused: [`validateConfig threw: ${describe(err)}`] });
    return;
  }
  if (!Array.isArray(problems) || !problems.every((p) => typeof p === 'string')) {
    send({ id, ok: false, refused: ['validateConfig did not return a list of strings'] });
    return;
  }
  if (problems.length > 0) {
    send({ id, ok: false, refused: problems.slice(0, 50).map((p: string) => describe(p)) });
    return;
  }
  provider = candidate;
  config = cfg;
  send({ id, ok: true, value: { kind: candidate.kind } });
}

async function call(id: number, op: string, args: Json[]): Promise<void> {
  if (provider === null) {
    send({ id, ok: false, error: 'the provider is not initialised' });
    return;
  }
  try {
    let value: unknown;
    if (op === 'begin') value = await provider.begin(args[0] ?? null, config);
    else if (op === 'credentialIdOf') value = await provider.credentialIdOf(args[0] ?? null);
    else if (op === 'finish') value = await provider.finish(args[0] ?? null, config, args[1] ?? null);
    else if (op === 'health') value = await provider.health(config);
    else if (op === 'ping') value = 'pong';
    else throw new Error(`unknown operation ${op}`);
    send({ id, ok: true, value: value === undefined ? null : value });
  } catch (err) {
    send({ id, ok: false, error: describe(err), ...codeOf(err) });
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Number.POSITIVE_INFINITY });
lines.on('line', (line) => {
  let msg: { id?: unknown; op?: unknown; entry?: unknown; exportName?: unknown; config?: Json; args?: unknown };
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (typeof msg.id !== 'number' || typeof msg.op !== 'string') return;
  if (msg.op === 'init') {
    void init(msg.id, String(msg.entry), String(msg.exportName), msg.config ?? null);
  } else {
    void call(msg.id, msg.op, Array.isArray(msg.args) ? (msg.args as Json[]) : []);
  }
});
// The service closed the channel: nothing more will be asked.
lines.on('close', () => process.exit(0));
