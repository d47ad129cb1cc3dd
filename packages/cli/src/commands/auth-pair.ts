import { ApiError, createNodeClient, NodeUnreachableError, type PreparedPairingJson } from '@svc/client';
import { isRealm } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS, PAIRING_MAX_FAILURES, PAIRING_MIN_TTL_SECONDS } from '@svc/core/settings';
import { parseCommandArgs, requireOption } from '../args.js';
import { CliError, UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { CREDENTIALS_HELP, CREDENTIALS_OPTIONS, savedSession } from '../credentials.js';
import { explainFailure } from '../errors-map.js';
import { printJson, printLine, shellQuote } from '../output.js';

/** The node surface URL: `--node-url`, else `$SVC_NODE_URL`, else `http://127.0.0.1:9091`. */
export function nodeUrlOf(flag: string | undefined): string {
  if (flag !== undefined && flag !== '') return flag;
  const fromEnv = process.env.SVC_NODE_URL;
  return fromEnv !== undefined && fromEnv !== '' ? fromEnv : 'http://127.0.0.1:9091';
}

const PAIRING_HINTS: Readonly<Record<string, string>> = {
  invalid_pairing_code: `check the code with the admin, and that --node-id names the node that prepared the intent (the proof is bound to it); after ${PAIRING_MAX_FAILURES} failed attempts the intent is burned`,
  invalid_pairing_intent: 'ask the admin for a new one (`svc auth pair`)',
  invalid_signature: 'the proof of possession did not verify for this node: is --node-url the node that prepared the intent?',
  already_enrolled: 'that key is already enrolled; generate a new one with `svc auth keygen --out FILE`',
  invalid_token: 'run `svc auth login --key FILE` (a management-realm session is needed to prepare a pairing)',
  rate_limited: 'too many failed attempts from this address; wait and try again',
};

/**
 * Turns a refusal from the node surface into one clear line (what failed, the stable code, what
 * to do); an unreachable node names the URL and the commands that serve it.
 *
 * @example
 * catch (error) { throw explainNodeFailure('pairing refused', error); }
 */
export function explainNodeFailure(what: string, error: unknown): unknown {
  if (error instanceof NodeUnreachableError) {
    return new CliError(
      `${what}: cannot reach the node surface at ${error.url}; is \`svc serve\` or \`svc node serve\` running there? (--node-url, SVC_NODE_URL)`,
      { cause: error },
    );
  }
  if (error instanceof ApiError && PAIRING_HINTS[error.code] !== undefined) {
    return new CliError(`${what} (${error.code}): ${error.detail}; ${PAIRING_HINTS[error.code]}`, { cause: error });
  }
  return explainFailure(what, error);
}

/**
 * The exact command the new device runs to complete `prepared` on the node at `nodeUrl`. It
 * holds no secret: the code is typed at the command's prompt (or given on standard input with
 * `--code -`), never put in the arguments where other local users can read it.
 */
export function completeCommand(nodeUrl: string, prepared: PreparedPairingJson): string {
  return [
    'svc auth pair complete',
    `--node-url ${shellQuote(nodeUrl)}`,
    // Quoted too: these come from the node, and a hostile one must not smuggle shell text in.
    `--node-id ${shellQuote(prepared.node_id)}`,
    `--intent ${shellQuote(prepared.intent_id)}`,
  ].join(' ');
}

const spec = {
  name: 'svc auth pair',
  summary:
    'Prepare a pairing (enrolment intent) for a new device, or a link intent for a passkey or company login, on the node surface; prints the one-time code.',
  usage:
    'svc auth pair (--device-key HEX | --provider NAME [--app-url URL]) [--node-url URL] [--realm management|application] [--name NAME] [--subject sub_...] [--ttl SECONDS] [--credentials FILE] [--json]',
  help: [
    "--device-key HEX      the new device's Ed25519 public key (64 hex, as its `svc auth keygen` printed):",
    '                      only that key can complete the pairing, so a leaked code is useless alone',
    '--provider NAME       instead of a device key: a link intent for that provider (its name in project.edn);',
    "                      the code's holder links a credential of it (a passkey, a company login) on the",
    "                      gateway's sign-in page and is signed in with it",
    "--app-url URL         with --provider: the gateway's address as browsers reach it, for the printed sign-in",
    '                      link (default: $SVC_APP_URL, else http://localhost:8080)',
    '--node-url URL        the node surface (default: $SVC_NODE_URL, else http://127.0.0.1:9091)',
    '--realm REALM         the realm the new device joins: management (default) or application',
    "--name NAME           the new device's name (the device may still choose one)",
    '--subject sub_...     pair the device to an existing subject (default: a new subject)',
    `--ttl SECONDS         how long the code stays valid, ${PAIRING_MIN_TTL_SECONDS} to the node's :auth/pairing-max-ttl-seconds (${DEFAULT_AUTH_SETTINGS.pairingMaxTtlSeconds} unless set), also the default`,
    ...CREDENTIALS_HELP,
    '',
    'Uses the management session saved by `svc auth login`. Then, on the new device, run the printed',
    '`svc auth pair complete ...` command with its own key (`svc auth keygen`) and type the code at its prompt.',
  ],
  options: {
    'device-key': { type: 'string' },
    provider: { type: 'string' },
    'app-url': { type: 'string' },
    'node-url': { type: 'string' },
    realm: { type: 'string' },
    name: { type: 'string' },
    subject: { type: 'string' },
    ttl: { type: 'string' },
    ...CREDENTIALS_OPTIONS,
  },
  positionals: [],
} as const;

/**
 * `svc auth pair`: `POST /edge/0-alpha/pairing/prepare` with the saved management session
 * (refreshed when needed), then prints the intent id, the one-time code, the node id, the
 * expiry and the exact command the new device runs.
 *
 * @example
 * await authPair.run(['--realm', 'application', '--name', 'kiosk', '--json']);
 */
export const authPair: Command = {
  path: ['auth', 'pair'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const realm = args.values.realm ?? 'management';
    if (!isRealm(realm)) throw new UsageError(`${spec.name}: --realm must be management or application`);
    let ttl: number | undefined;
    if (args.values.ttl !== undefined) {
      if (!/^[1-9]\d{0,5}$/.test(args.values.ttl)) throw new UsageError(`${spec.name}: --ttl takes whole seconds, e.g. --ttl 300`);
      ttl = Number(args.values.ttl);
    }
    const provider = args.values.provider;
    if (provider !== undefined) {
      if (args.values['device-key'] !== undefined) {
        throw new UsageError(`${spec.name}: give --device-key (a device) or --provider (a passkey or login), not both`);
      }
      return await prepareLinkIntent(args.values, { realm, ttl, provider });
    }
    if (args.values['app-url'] !== undefined) throw new UsageError(`${spec.name}: --app-url goes with --provider`);
    const deviceKey = requireOption(args.values['device-key'], '--device-key HEX (or --provider NAME)', spec.name);
    if (!/^[0-9a-fA-F]{64}$/.test(deviceKey)) {
      throw new UsageError(
        `${spec.name}: --device-key takes the new device's public key, 64 hex digits (its \`svc auth keygen\` or \`svc auth pubkey\` prints it)`,
      );
    }
    const nodeUrl = nodeUrlOf(args.values['node-url']);
    const session = savedSession(args.values.credentials, args.values.context);
    const node = createNodeClient({ baseUrl: nodeUrl, ...session.dpop });
    let prepared: PreparedPairingJson;
    try {
      prepared = await session.withAccessToken((token) =>
        node.preparePairing(token, {
          realm,
          public_key: deviceKey,
          ...(args.values.name === undefined ? {} : { name: args.values.name }),
          ...(args.values.subject === undefined ? {} : { subject: args.values.subject }),
          ...(ttl === undefined ? {} : { ttl_seconds: ttl }),
        }),
      );
    } catch (error) {
      throw explainNodeFailure('pairing could not be prepared', error);
    }
    if (prepared.public_key !== deviceKey.toLowerCase()) {
      throw new CliError(`the node at ${node.baseUrl} pinned a different device key than --device-key; do not use this pairing`);
    }
    const command = completeCommand(node.baseUrl, prepared);
    if (args.values.json === true) {
      printJson({ ...prepared, node_url: node.baseUrl, command });
    } else {
      printLine(`pairing prepared on ${node.baseUrl}`);
      printLine(`intent:   ${prepared.intent_id}`);
      printLine(`code:     ${prepared.code}   (single use; ${PAIRING_MAX_FAILURES} wrong codes burn it)`);
      printLine(`node id:  ${prepared.node_id}`);
      printLine(`cluster:  ${prepared.cluster_id}   (any node of it can complete the pairing; run complete with that node's URL and id)`);
      printLine(`realm:    ${prepared.realm}`);
      printLine(`subject:  ${prepared.subject}${prepared.name === null ? '' : `  name: ${prepared.name}`}`);
      printLine(`key:      ${prepared.public_key}   (only this device key can complete it)`);
      printLine(`expires:  ${prepared.expires_at} (in ${prepared.expires_in} s)`);
      printLine('');
      printLine('On the new device (the one holding that key), run:');
      printLine(`  ${command}`);
      printLine('enter the code when it asks, and check that it reports the same node id.');
    }
    return 0;
  },
};

/** The gateway's address for the printed sign-in link: `--app-url`, else `$SVC_APP_URL`, else `http://localhost:8080`. */
function appUrlOf(flag: string | undefined): string {
  const url = flag ?? process.env.SVC_APP_URL ?? '';
  const chosen = url === '' ? 'http://localhost:8080' : url;
  let parsed: URL;
  try {
    parsed = new URL(chosen);
  } catch {
    throw new UsageError(`${spec.name}: --app-url must be the gateway's http(s) address, e.g. https://app.example.com`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new UsageError(`${spec.name}: --app-url must be the gateway's http(s) address, e.g. https://app.example.com`);
  }
  return parsed.origin;
}

/**
 * `svc auth pair --provider NAME`: a link intent on the node surface, then the sign-in link the
 * user opens and the code they type there (never in the link: it would land in browser history
 * and proxy logs).
 */
async function prepareLinkIntent(
  values: {
    readonly 'node-url'?: string;
    readonly 'app-url'?: string;
    readonly name?: string;
    readonly subject?: string;
    readonly credentials?: string;
    readonly context?: string;
    readonly json?: boolean;
  },
  input: { readonly realm: 'management' | 'application'; readonly ttl: number | undefined; readonly provider: string },
): Promise<number> {
  const appUrl = appUrlOf(values['app-url']);
  const nodeUrl = nodeUrlOf(values['node-url']);
  const session = savedSession(values.credentials, values.context);
  const node = createNodeClient({ baseUrl: nodeUrl, ...session.dpop });
  let prepared: PreparedPairingJson;
  try {
    prepared = await session.withAccessToken((token) =>
      node.preparePairing(token, {
        realm: input.realm,
        provider: input.provider,
        ...(values.name === undefined ? {} : { name: values.name }),
        ...(values.subject === undefined ? {} : { subject: values.subject }),
        ...(input.ttl === undefined ? {} : { ttl_seconds: input.ttl }),
      }),
    );
  } catch (error) {
    throw explainNodeFailure('the link intent could not be prepared', error);
  }
  if (prepared.provider !== input.provider) {
    throw new CliError(`the node at ${node.baseUrl} prepared an intent for another provider than --provider; do not use it`);
  }
  const signIn = `${appUrl}/.svc/auth/v1/login?pairing=${encodeURIComponent(prepared.intent_id)}`;
  if (values.json === true) {
    printJson({ ...prepared, node_url: node.baseUrl, sign_in_url: signIn });
    return 0;
  }
  printLine(`link intent prepared on ${node.baseUrl}`);
  printLine(`intent:   ${prepared.intent_id}`);
  printLine(`code:     ${prepared.code}   (single use; ${PAIRING_MAX_FAILURES} wrong codes burn it)`);
  printLine(`realm:    ${prepared.realm}`);
  printLine(`subject:  ${prepared.subject}${prepared.name === null ? '' : `  name: ${prepared.name}`}`);
  printLine(`provider: ${prepared.provider}   (only a credential of this provider can complete it)`);
  printLine(`expires:  ${prepared.expires_at} (in ${prepared.expires_in} s)`);
  printLine('');
  printLine('Give the user this link and, separately, the code:');
  printLine(`  ${signIn}`);
  printLine('they type the code on that page and set up their credential; they are then signed in as that subject.');
  return 0;
}
