import { resolve } from 'node:path';
import { backupProject, chosenProfile, loadProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth backup',
  summary:
    'Write a consistent copy of the control database to a new owner-only file signed by the node key, also while the service is serving.',
  usage: 'svc auth backup <PROJECT> <FILE> [--json]',
  help: [
    '<PROJECT>             the project directory',
    '<FILE>                the backup file to create (never overwritten; mode 0600; the node key is not included); its signature goes to <FILE>.sig',
    '--json                print {"file","signature","project_id","schema_version","node_id","node_public_key"}',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT', 'FILE'],
} as const;

/**
 * `svc auth backup <PROJECT> <FILE>`: an online, consistent snapshot of the embedded control
 * database (one SQLite `VACUUM INTO`) without transient flow state, owner-only, signed by the
 * node key into `<FILE>.sig`. For PostgreSQL it points to pg_dump.
 *
 * @example
 * await authBackup.run(['./demo', '/backups/demo.db']);
 */
export const authBackup: Command = {
  path: ['auth', 'backup'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir, file] = args.positionals as [string, string];
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const target = resolve(file);
    const info = await backupProject(project, target);
    if (args.values.json === true) {
      printJson({
        file: target,
        signature: info.signatureFile,
        project_id: info.projectId,
        schema_version: info.schemaVersion,
        node_id: info.nodeId,
        node_public_key: info.nodePublicKey,
      });
    } else {
      printText(
        `backed up project ${info.projectId} (schema ${info.schemaVersion}) to ${target} (owner-only; the node key is not included)`,
      );
      printText(`signed by node ${info.nodeId} (public key ${info.nodePublicKey}) into ${info.signatureFile}; keep the two files together`);
    }
    return 0;
  },
};
