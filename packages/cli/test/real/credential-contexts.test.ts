import assert from 'node:assert/strict';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, type StartedProcess, startUntilReady, tempDir } from '../helpers.js';
// The service is the installed `svc serve`, spawned; the operator's commands, whose process
// boundary is not the subject (contexts in the credentials file are), run in process.
import {
  enrolledProjectInProcess as enrolledProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';

// biome-ignore lint/suspicious/noExplicitAny: CLI JSON output is inspected field by field
type Json = any;

const READY = {
  management: /svc auth: management API listening on (http:\/\/\S+)\n/,
  node: /svc node: node surface listening on (http:\/\/\S+)\n/,
  app: /svc app: application gateway listening on (http:\/\/\S+)\n/,
};

/** The context name `svc auth login` gives a sign-in by default: realm@host:port. */
function contextName(realm: string, url: string): string {
  return `${realm}@${new URL(url).host}`;
}

describe('signing in to an application keeps the admin signed in: one context per service URL and realm', () => {
  const tmp = tempDir('svc-contexts-test-');
  const creds = join(tmp.dir, 'home', '.config', 'svc', 'credentials.json');
  // One operator, one machine, one credentials file (the default one, under HOME).
  const env = cleanEnv({ HOME: join(tmp.dir, 'home') });
  let server: StartedProcess<{ management: string; node: string; app: string }>;
  let adminKey: string;
  let appKey: string;
  let adminContext: string;
  let appContext: string;

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env });
    adminKey = p.keyFile;
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', '127.0.0.1:0', p.dir],
      (out) => {
        const [m, n, a] = [READY.management.exec(out), READY.node.exec(out), READY.app.exec(out)];
        return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
      },
      { env },
    );
    adminContext = contextName('management', server.ready.management);
    appContext = contextName('application', server.ready.app);
    // The operator's second key, paired as an application device with the admin's session.
    await svcOk(['auth', 'login', '--key', adminKey, '--url', server.ready.management], { env });
    appKey = join(tmp.dir, 'app-device.pem');
    const pub = await keygen(appKey, { env });
    const nodeId = ((await (await fetch(`${server.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;
    const prepared: Json = JSON.parse(
      (
        await svcOk(
          ['auth', 'pair', '--node-url', server.ready.node, '--realm', 'application', '--device-key', pub, '--name', 'ops-app', '--json'],
          { env },
        )
      ).stdout,
    );
    const completion = [
      ...['auth', 'pair', 'complete', '--node-url', server.ready.node, '--node-id', nodeId],
      ...['--intent', prepared.intent_id, '--code', prepared.code, '--key', appKey, '--json'],
    ];
    await svcOk(completion, { env });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('admin login, then application login: both sign-ins are kept and usable side by side (whoami --context)', async () => {
    const app: Json = JSON.parse(
      (await svcOk(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', appKey, '--json'], { env })).stdout,
    );
    assert.equal(app.context, appContext);

    const asAdmin: Json = JSON.parse((await svcOk(['auth', 'whoami', '--context', adminContext, '--json'], { env })).stdout);
    assert.equal(asAdmin.realm, 'management');
    const asApp: Json = JSON.parse((await svcOk(['auth', 'whoami', '--context', appContext, '--json'], { env })).stdout);
    assert.equal(asApp.realm, 'application');
    assert.equal(asApp.session, app.session_id);
    // The latest sign-in is current; management commands still find the one management context.
    const current: Json = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout);
    assert.equal(current.realm, 'application');
    assert.equal((await svc(['auth', 'devices', '--json'], { env })).code, 0, 'the admin session still lists devices');

    const listed: Json = JSON.parse((await svcOk(['auth', 'contexts', '--json'], { env })).stdout);
    assert.deepEqual(
      listed.contexts.map((c: Json) => [c.name, c.realm, c.current]),
      [
        [appContext, 'application', true],
        [adminContext, 'management', false],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
    assert.doesNotMatch((await svcOk(['auth', 'contexts'], { env })).stdout, /svca_|svcr_/, 'the listing shows no token');
    assert.equal(statSync(creds).mode & 0o777, 0o600);

    // Switching, then logging one out, leaves the other signed in.
    await svcOk(['auth', 'contexts', 'use', adminContext], { env });
    assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout).realm, 'management');
    await svcOk(['auth', 'logout', '--context', appContext], { env });
    assert.equal((await svc(['auth', 'whoami', '--context', appContext], { env })).code, 1);
    assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout).realm, 'management');
  });

  test('a credentials.json from before contexts is read as one context and kept when another sign-in is added', async () => {
    const file: Json = JSON.parse(readFileSync(creds, 'utf8'));
    const admin = file.contexts[adminContext];
    assert.ok(admin, `the admin context ${adminContext} is saved`);
    writeFileSync(creds, `${JSON.stringify(admin, null, 2)}\n`, { mode: 0o600 });

    assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env })).stdout).realm, 'management', 'the old file still works');
    await svcOk(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', appKey], { env });
    const migrated: Json = JSON.parse(readFileSync(creds, 'utf8'));
    assert.equal(migrated.version, 2);
    assert.deepEqual(Object.keys(migrated.contexts).sort(), [adminContext, appContext].sort());
    assert.equal(migrated.contexts[adminContext].session_id, admin.session_id, 'the old sign-in is kept as it was');
    assert.equal(JSON.parse((await svcOk(['auth', 'whoami', '--context', adminContext, '--json'], { env })).stdout).realm, 'management');
  });

  test('an unknown --context is one clear line (exit 1); a malformed one is a usage error (exit 2)', async () => {
    const unknown = await svc(['auth', 'whoami', '--context', 'nope'], { env });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no context "nope"/);
    const malformed = await svc(['auth', 'whoami', '--context', '../x'], { env });
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /not a context name/);
  });
});
