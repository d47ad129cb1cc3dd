import { resolve } from 'node:path';
import { parseCommandArgs } from '../args.js';
import { restoreProject } from '../backup.js';
import { type Command, PROJECT_HELP, PROJECT_OPTIONS } from '../command.js';
import { printJson, printText } from '../output.js';
import { chosenProfile, loadProject } from '../project.js';

const spec = {
  name: 'svc auth restore',
  summary: 'Put a backup back as the control database, with the service stopped (checks project, schema and audit chain first).',
  usage: 'svc auth restore <PROJECT> <FILE> [--json]',
  help: [
    '<PROJECT>             the project directory (its control database may be missing: disaster recovery)',
    '<FILE>                a file written by `svc auth backup`',
    '--json                print {"control_db","project_id","schema_version","audit_events","pre_restore","node_key_created"}',
    PROJECT_HELP,
  ],
  options: { json: { type: 'boolean' }, ...PROJECT_OPTIONS },
  positionals: ['PROJECT', 'FILE'],
} as const;

/**
 * `svc auth restore <PROJECT> <FILE>`: refuses while the control database is in use, a backup
 * of another project, a newer schema or a broken audit chain; otherwise replaces the control
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
    const project = loadProject(dir, { profile: chosenProfile(args.values.profile, process.env), env: process.env });
    const r = await restoreProject(project, resolve(file));
    if (args.values.json === true) {
      printJson({
        control_db: r.file,
        project_id: r.projectId,
        schema_version: r.schemaVersion,
        audit_events: r.auditEvents,
        pre_restore: r.preRestore,
        node_key_created: r.nodeKeyCreated,
      });
      return 0;
    }
    printText(`restored project ${r.projectId} (schema ${r.schemaVersion}, audit chain ok: ${r.auditEvents} events) into ${r.file}`);
    if (r.preRestore !== null) printText(`the replaced control database is kept as ${r.preRestore}`);
    if (r.nodeKeyCreated) {
      printText(
        `the project had no node key: created a new one at ${project.nodeKey} (a new node identity); put your saved node-key.pem back instead to keep the old one`,
      );
    }
    return 0;
  },
};
