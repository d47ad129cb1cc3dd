import { resolve } from 'node:path';
import { nodeIdOf } from '@svc/core';
import { chosenProfile, loadProject, restoreProject } from '@svc/runtime';
import { parseCommandArgs } from '../args.js';
import { UsageError } from '../cli-error.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';

const spec = {
  name: 'svc auth restore',
  summary:
    'Put a backup back as the control database, with the service stopped (checks its signature, project, schema, audit chain and that the trail accounts for every device, link and session first).',
  usage: 'svc auth restore <PROJECT> <FILE> [--trusted-key HEX]... [--json]',
  help: [
    '<PROJECT>             the project directory (its control database may be missing: disaster recovery)',
    '<FILE>                a file written by `svc auth backup`, with its signature <FILE>.sig beside it',
    '--trusted-key HEX     also trust backups signed by this Ed25519 public key (64 hex digits; repeatable): the node key of a project whose control directory was lost, as `svc auth backup` printed it, or a retired node key for a backup made before `svc node rotate-key` (only the current node key is trusted without it)',
    '--json                print {"control_db","project_id","schema_version","audit_events","pre_restore","node_key_created","signed_by"}',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, 'trusted-key': { type: 'string', multiple: true }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT', 'FILE'],
} as const;

/**
 * `svc auth restore <PROJECT> <FILE>`: refuses while the control database is in use, a backup
 * of another project, one without a signature by a trusted key (the project's current node key,
 * or one named with `--trusted-key`: a retired node key only so), a newer schema, a broken audit chain or state
 * the audit trail does not account for; otherwise replaces the control
 * database atomically and keeps the old one as `control.db.pre-restore-<UTC time>`.
 *
 * @example
 * await authRestore.run(['./demo', '/backups/demo.db']);
 */
export const authRestore: Command = {
  path: ['auth', 'restore'],
  summary: spec.summary,
  async run(argv) {
    const args = parseCommandArgs(spec, argv);
    if (args === null) return 0;
    const [dir, file] = args.positionals as [string, string];
    const trustedKeys = args.values['trusted-key'] ?? [];
    for (const key of trustedKeys) {
      if (!/^[0-9a-fA-F]{64}$/.test(key)) {
        throw new UsageError(`${spec.name}: --trusted-key must be an Ed25519 public key, 64 hex digits; see \`${spec.name} --help\``);
      }
    }
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const r = await restoreProject(project, resolve(file), { trustedKeys: trustedKeys.map((k) => k.toLowerCase()) });
    if (args.values.json === true) {
      printJson({
        control_db: r.file,
        project_id: r.projectId,
        schema_version: r.schemaVersion,
        audit_events: r.auditEvents,
        pre_restore: r.preRestore,
        node_key_created: r.nodeKeyCreated,
        signed_by: r.signedBy,
      });
      return 0;
    }
    printText(`restored project ${r.projectId} (schema ${r.schemaVersion}, audit chain ok: ${r.auditEvents} events) into ${r.file}`);
    printText(`the backup's signature is by the trusted key ${r.signedBy} (node ${nodeIdOf(r.signedBy)})`);
    if (r.preRestore !== null) printText(`the replaced control database is kept as ${r.preRestore}`);
    if (r.nodeKeyCreated) {
      printText(
        `the project had no node key: created a new one at ${project.nodeKey} (a new node identity); put your saved node-key.pem back instead to keep the old one`,
      );
    }
    return 0;
  },
};
