import { createNodeClient, defaultDeviceKeyPath, NodeIdentityError, pairDevice } from '@svc/client';
import { normalizeNodeId } from '@svc/core';
import { parseCommandArgs, requireOption } from '../args.js';
import { CliError, UsageError } from '../cli-error.js';
import type { Command } from '../command.js';
import { readDeviceKey } from '../device-key-file.js';
import { printJson, printLine, shellQuote } from '../output.js';
import { readSecret } from '../secret-input.js';
import { explainNodeFailure, nodeUrlOf } from './auth-pair.js';

const spec = {
  name: 'svc auth pair complete',
  summary: 'Complete a pairing on the new device: prove possession of its key with the one-time code.',
  usage: 'svc auth pair complete --intent int_... [--code -] [--key FILE] [--node-url URL] [--node-id ID] [--name NAME] [--json]',
  help: [
    '--intent int_...      the intent id the admin got from `svc auth pair`',
    '--code -              read the one-time code from standard input (on a terminal, and when left out:',
    '                      a prompt that does not echo); case, spaces and dashes do not matter',
    "--key FILE            this device's Ed25519 key (default: $SVC_DEVICE_KEY, else ~/.config/svc/device.pem)",
    '--node-url URL        the node surface (default: $SVC_NODE_URL, else http://127.0.0.1:9091)',
    '--node-id ID          the node id the admin read out: refuse to pair with any other node',
    "--name NAME           this device's name",
    '--json                print {"device": Device, "node_id"}',
  ],
  options: {
    intent: { type: 'string' },
    code: { type: 'string' },
    key: { type: 'string' },
    'node-url': { type: 'string' },
    'node-id': { type: 'string' },
    name: { type: 'string' },
    json: { type: 'boolean' },
  },
  positionals: [],
} as const;

/**
 * `svc auth pair complete`: reads the node's discovery document, refuses a node whose id does
 * not check out (or differs from `--node-id`), signs the pairing proof with the device key and
 * completes the intent; prints the new device. Neither the code nor the proof is sent to a
 * node that fails the check.
 *
 * @example
 * await authPairComplete.run(['--intent', 'int_...', '--code', 'ABCD-EFGH', '--key', 'device.pem', '--node-id', '7K2M-...']);
 */
export const authPairComplete: Command = {
  path: ['auth', 'pair', 'complete'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const intentId = requireOption(args.values.intent, '--intent int_...', spec.name);
    const keyFile = args.values.key ?? defaultDeviceKeyPath(process.env);
    const expected = args.values['node-id'];
    if (expected !== undefined && normalizeNodeId(expected) === null) {
      throw new UsageError(
        `${spec.name}: --node-id ${JSON.stringify(expected)} is not a node id (wrong length or check symbol); re-type it`,
      );
    }
    const key = readDeviceKey(keyFile);
    const code = await readSecret(args.values.code, { what: 'pairing code', command: spec.name, dashForm: '`--code -`' });
    const node = createNodeClient({ baseUrl: nodeUrlOf(args.values['node-url']) });
    let result: Awaited<ReturnType<typeof pairDevice>>;
    try {
      result = await pairDevice(node, key, {
        intentId,
        code,
        ...(expected === undefined ? {} : { expectedNodeId: expected }),
        ...(args.values.name === undefined ? {} : { name: args.values.name }),
      });
    } catch (error) {
      if (error instanceof NodeIdentityError) {
        throw new CliError(`refusing to pair with the node at ${node.baseUrl}: ${error.message}`, { cause: error });
      }
      throw explainNodeFailure('pairing refused', error);
    }
    const { device, nodeId, preparedByNode, clusterId } = result;
    if (args.values.json === true) {
      printJson({ device, node_id: nodeId, prepared_by_node: preparedByNode, completed_by_node: nodeId, cluster_id: clusterId });
    } else {
      printLine(`paired with node ${nodeId}`);
      if (preparedByNode !== null && preparedByNode !== nodeId) printLine(`prepared: on node ${preparedByNode} (same cluster)`);
      printLine(`cluster:  ${clusterId}`);
      printLine(`device:   ${device.id}  (${device.name})`);
      printLine(`realm:    ${device.realm}`);
      printLine(`subject:  ${device.subject}`);
      printLine(`key:      ${device.public_key}`);
      if (device.realm === 'management') printLine(`next: svc auth login --key ${shellQuote(keyFile)} [--url MANAGEMENT_URL]`);
      else printLine(`next: svc auth login --realm application --key ${shellQuote(keyFile)} --url APPLICATION_URL`);
    }
    return 0;
  },
};
