import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { cleanEnv, run, type StartedProcess, startUntilReady, svc, svcOk, tempDir } from '../helpers.js';
import { enrolledProjectInProcess as enrolledProject, keygenInProcess as keygen, svcOkInProcess } from '../in-process.js';
import { currentCredentials } from '../support/credentials-file.js';

// biome-ignore lint/suspicious/noExplicitAny: CLI and SCIM JSON is inspected field by field
type Json = any;

const READY = {
  management: /svc auth: management API listening on (http:\/\/\S+)\n/,
  node: /svc node: node surface listening on (http:\/\/\S+)\n/,
  app: /svc app: application gateway listening on (http:\/\/\S+)\n/,
};

// A foreign SCIM client: Python's urllib, as a directory's connector would speak to the
// gateway. The bearer token comes from the environment, never from the arguments.
const SCIM_CLIENT = `
import json, os, sys, urllib.request, urllib.error
method, path = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
req = urllib.request.Request(os.environ["SCIM_BASE"] + path, data=body, method=method)
req.add_header("Authorization", "Bearer " + os.environ["SCIM_TOKEN"])
req.add_header("Accept", "application/scim+json")
if body is not None:
    req.add_header("Content-Type", "application/scim+json")
try:
    with urllib.request.urlopen(req, timeout=30) as res:
        status, ctype, text = res.status, res.headers.get("Content-Type", ""), res.read().decode()
except urllib.error.HTTPError as e:
    status, ctype, text = e.code, e.headers.get("Content-Type", ""), e.read().decode()
print(json.dumps({"status": status, "content_type": ctype, "body": json.loads(text) if text else None}))
`;

describe('SCIM provisioning through svc serve (SQLite) with a foreign client, and SCIM tokens through the svc CLI', () => {
  const tmp = tempDir('svc-scim-test-');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: join(tmp.dir, 'admin-home', 'credentials.json') });
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: join(tmp.dir, 'device-home', 'app.json') });
  const client = join(tmp.dir, 'scim_client.py');
  let server: StartedProcess<{ management: string; node: string; app: string }>;
  let project: string;
  let offlineToken: Json;

  /** One SCIM request by the Python client with `token`. */
  async function scim(token: string, method: string, path: string, body?: unknown): Promise<Json> {
    const r = await run('python3', [client, method, path, ...(body === undefined ? [] : [JSON.stringify(body)])], {
      env: { ...process.env, SCIM_BASE: `${server.ready.app}/.svc/scim/v2`, SCIM_TOKEN: token },
    });
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  }

  before(async () => {
    writeFileSync(client, SCIM_CLIENT);
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    project = p.dir;
    // Offline, on the project, before the service runs: the spawned CLI prints the token once.
    offlineToken = JSON.parse(
      (await svcOk(['auth', 'scim', 'token', 'create', '--name', 'entra', project, '--json'], { env: adminEnv })).stdout,
    );
    server = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', '127.0.0.1:0', project],
      (out) => {
        const [m, n, a] = [READY.management.exec(out), READY.node.exec(out), READY.app.exec(out)];
        return m && n && a ? { management: m[1] as string, node: n[1] as string, app: a[1] as string } : null;
      },
      { env: adminEnv },
    );
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', server.ready.management], { env: adminEnv });
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('svc auth scim token create prints svcs_... once; list never shows it; revoke refuses it at once', async () => {
    assert.match(offlineToken.token, /^svcs_[A-Za-z0-9_-]{43}$/);
    assert.match(offlineToken.id, /^sct_/);
    // Over the management API with the saved session, in text form.
    const text = await svcOk(['auth', 'scim', 'token', 'create', '--name', 'okta'], { env: adminEnv });
    const printed = /^(svcs_[A-Za-z0-9_-]{43})$/m.exec(text.stdout)?.[1];
    assert.ok(printed !== undefined, text.stdout);
    assert.equal((await scim(printed, 'GET', '/ServiceProviderConfig')).status, 200);
    const list = await svcOk(['auth', 'scim', 'token', 'list', '--json'], { env: adminEnv });
    const tokens = JSON.parse(list.stdout).tokens as Json[];
    assert.deepEqual(tokens.map((t) => t.name).sort(), ['entra', 'okta']);
    assert.equal(list.stdout.includes('svcs_'), false, 'no token in the listing');
    const okta = tokens.find((t) => t.name === 'okta');
    assert.notEqual(okta.last_used_at, null);
    await svcOk(['auth', 'scim', 'token', 'revoke', okta.id], { env: adminEnv });
    const refused = await scim(printed, 'GET', '/Users');
    assert.equal(refused.status, 401);
    assert.deepEqual(refused.body.schemas, ['urn:ietf:params:scim:api:messages:2.0:Error']);
    const again = await svc(['auth', 'scim', 'token', 'revoke', okta.id], { env: adminEnv });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /not_found.*svc auth scim token list/);
    const usage = await svc(['auth', 'scim', 'token', 'revoke', 'nope'], { env: adminEnv });
    assert.equal(usage.code, 2);
    const noName = await svc(['auth', 'scim', 'token', 'create'], { env: adminEnv });
    assert.equal(noName.code, 2);
  });

  test('an IdP sequence over real HTTP: create user, create group, add member, deactivate (the live session is refused at once), delete', async () => {
    const token = offlineToken.token as string;
    const created = await scim(token, 'POST', '/Users', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      userName: 'ada@example.com',
      externalId: 'entra-ada',
      name: { givenName: 'Ada', familyName: 'Lovelace' },
      emails: [{ value: 'ada@example.com', type: 'work', primary: true }],
      active: true,
    });
    assert.equal(created.status, 201, JSON.stringify(created));
    assert.match(created.content_type, /^application\/scim\+json/);
    const id = created.body.id as string;
    assert.equal(created.body.meta.location, `${server.ready.app}/.svc/scim/v2/Users/${id}`);
    const dup = await scim(token, 'POST', '/Users', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
      userName: 'ada@example.com',
    });
    assert.deepEqual([dup.status, dup.body.scimType], [409, 'uniqueness']);

    // Ada's device is paired to the provisioned subject and signs in at the gateway.
    const keyFile = join(tmp.dir, 'ada.pem');
    const pub = await keygen(keyFile, { env: deviceEnv });
    const nodeId = ((await (await fetch(`${server.ready.node}/.well-known/edge`)).json()) as { node_id: string }).node_id;
    const prepared = JSON.parse(
      (
        await svcOkInProcess(
          ['auth', 'pair', '--node-url', server.ready.node, '--realm', 'application', '--subject', id, '--device-key', pub, '--json'],
          { env: adminEnv },
        )
      ).stdout,
    );
    await svcOkInProcess(
      [
        'auth',
        'pair',
        'complete',
        '--node-url',
        server.ready.node,
        '--node-id',
        nodeId,
        '--intent',
        prepared.intent_id,
        '--code',
        prepared.code,
        '--key',
        keyFile,
      ],
      { env: deviceEnv },
    );
    await svcOkInProcess(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', keyFile], { env: deviceEnv });
    const access = currentCredentials(join(tmp.dir, 'device-home', 'app.json')).access_token as string;
    const me = async () => fetch(`${server.ready.app}/.svc/auth/v1/me`, { headers: { authorization: `Bearer ${access}` } });
    const before = await me();
    assert.equal(before.status, 200);
    const principal = (await before.json()) as Json;
    assert.equal(principal.subject, id);

    const group = await scim(token, 'POST', '/Groups', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'],
      displayName: 'engineers',
    });
    assert.equal(group.status, 201, JSON.stringify(group));
    const refused = await scim(token, 'POST', '/Groups', {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'],
      displayName: 'Tour Guides',
    });
    assert.deepEqual([refused.status, refused.body.scimType], [400, 'invalidValue']);
    const added = await scim(token, 'PATCH', `/Groups/${group.body.id}`, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'add', path: 'members', value: [{ value: id }] }],
    });
    assert.equal(added.status, 200, JSON.stringify(added));
    assert.deepEqual(
      added.body.members.map((m: Json) => m.value),
      [id],
    );
    const withGroup = (await (await me()).json()) as Json;
    assert.deepEqual(withGroup.claims.groups, ['engineers']);
    assert.equal(withGroup.claims.email, 'ada@example.com');

    const off = await scim(token, 'PATCH', `/Users/${id}`, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'Replace', value: { active: false } }],
    });
    assert.equal(off.status, 200, JSON.stringify(off));
    assert.equal(off.body.active, false);
    assert.equal((await me()).status, 401, "the live session's next request is refused");
    const login = await svc(['auth', 'login', '--realm', 'application', '--url', server.ready.app, '--key', keyFile], { env: deviceEnv });
    assert.equal(login.code, 1, 'a disabled user cannot sign in again');
    assert.match(login.stderr, /user_disabled/);

    const found = await scim(token, 'GET', `/Users?filter=${encodeURIComponent('userName eq "ada@example.com"')}`);
    assert.equal(found.body.totalResults, 1);
    assert.equal((await scim(token, 'DELETE', `/Users/${id}`)).status, 204);
    assert.equal((await scim(token, 'GET', `/Users/${id}`)).status, 404);
    const audit = await svcOk(['auth', 'audit', project, '--json'], { env: adminEnv });
    for (const type of ['scim_token.created', 'user.created', 'group.saved', 'user.disabled', 'user.removed', 'scim_token.revoked']) {
      assert.ok(audit.stdout.includes(`"${type}"`), `audited: ${type}`);
    }
    assert.equal(audit.stdout.includes(token), false, 'no token in the audit log');
  });
});
