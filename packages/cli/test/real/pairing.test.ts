import assert from 'node:assert/strict';
import { type AddressInfo, createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { normalizeNodeId } from '@svc/core';
import { cleanEnv, svcOnTerminal, tempDir } from '../helpers.js';
// The service is the installed `svc`, spawned; the operator's commands, whose process boundary
// is not the subject here, run in process (svcInProcess).
import {
  enrolledProjectInProcess as enrolledProject,
  keygenInProcess as keygen,
  svcInProcess as svc,
  svcOkInProcess as svcOk,
} from '../in-process.js';
import { type ServeProcess, startServe } from '../support/node-serve.js';

// biome-ignore lint/suspicious/noExplicitAny: CLI JSON output is inspected field by field
type Json = any;

describe('pairing a second device through the real svc CLI', () => {
  const tmp = tempDir('svc-pairing-test-');
  const adminCreds = join(tmp.dir, 'admin-home', 'credentials.json');
  const deviceCreds = join(tmp.dir, 'device-home', 'credentials.json');
  const adminEnv = cleanEnv({ HOME: join(tmp.dir, 'admin-home'), SVC_CREDENTIALS: adminCreds });
  const deviceEnv = cleanEnv({ HOME: join(tmp.dir, 'device-home'), SVC_CREDENTIALS: deviceCreds });
  let server: ServeProcess;
  let nodeUrl: string;
  let managementUrl: string;
  let nodeId: string;

  /** The new device makes its key (`keyFile`); the admin prepares a pairing pinned to it. */
  async function pair(keyFile: string, args: readonly string[] = []): Promise<Json> {
    const pub = await keygen(keyFile, { env: deviceEnv });
    return JSON.parse(
      (await svcOk(['auth', 'pair', '--node-url', nodeUrl, '--device-key', pub, '--json', ...args], { env: adminEnv })).stdout,
    );
  }

  before(async () => {
    const p = await enrolledProject(tmp.dir, { env: adminEnv });
    server = await startServe(['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', p.dir], {
      env: adminEnv,
      management: true,
    });
    nodeUrl = server.nodeUrl;
    managementUrl = server.managementUrl as string;
    await svcOk(['auth', 'login', '--key', p.keyFile, '--url', managementUrl], { env: adminEnv });
    nodeId = ((await (await fetch(`${nodeUrl}/.well-known/edge`)).json()) as { node_id: string }).node_id;
  });
  after(async () => {
    await server?.stop('SIGKILL');
    tmp.cleanup();
  });

  test('a fake node listener on a network address captures no management token from `svc auth pair --node-url http://...`', async (t) => {
    const net = Object.values(networkInterfaces())
      .flat()
      .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal);
    if (net === undefined) return t.skip('this machine has no non-loopback IPv4 address');
    let captured = '';
    let connections = 0;
    const fake = createServer((socket) => {
      connections++;
      socket.on('data', (d: Buffer) => {
        captured += d.toString('latin1');
        socket.end('HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, net.address, resolve));
    try {
      const port = (fake.address() as AddressInfo).port;
      const r = await svc(['auth', 'pair', '--node-url', `http://${net.address}:${port}`, '--device-key', 'ab'.repeat(32), '--json'], {
        env: adminEnv,
      });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /insecure_bearer_url/);
      assert.equal(connections, 0, 'nothing connected to the fake listener');
      assert.doesNotMatch(captured, /svca_/);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });

  test('admin prepares, the new device completes, logs in and whoami shows the paired device', async () => {
    const keyFile = join(tmp.dir, 'laptop-2.pem');
    const prepared = await pair(keyFile, ['--name', 'laptop-2', '--ttl', '600']);
    assert.match(prepared.intent_id, /^int_/);
    assert.match(prepared.code, /^[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    assert.equal(prepared.node_id, nodeId);
    assert.equal(prepared.realm, 'management');
    assert.equal(prepared.expires_in, 600);
    assert.equal(prepared.command, `svc auth pair complete --node-url ${nodeUrl} --node-id ${nodeId} --intent ${prepared.intent_id}`);

    const pub = prepared.public_key;
    const done = JSON.parse(
      (
        await svcOk(
          [
            'auth',
            'pair',
            'complete',
            '--node-url',
            nodeUrl,
            '--node-id',
            nodeId.toLowerCase(),
            '--intent',
            prepared.intent_id,
            '--code',
            prepared.code,
            '--key',
            keyFile,
            '--json',
          ],
          { env: deviceEnv },
        )
      ).stdout,
    );
    assert.equal(done.node_id, nodeId);
    assert.equal(done.device.public_key, pub);
    assert.equal(done.device.realm, 'management');
    assert.equal(done.device.name, 'laptop-2');
    assert.equal(done.device.subject, prepared.subject);

    await svcOk(['auth', 'login', '--key', keyFile, '--url', managementUrl], { env: deviceEnv });
    const me = JSON.parse((await svcOk(['auth', 'whoami', '--json'], { env: deviceEnv })).stdout);
    assert.equal(me.realm, 'management');
    assert.equal(me.device, done.device.id);
    assert.equal(me.subject, prepared.subject);
  });

  test('the command printed for the new device works exactly as printed, the code typed at its prompt', async () => {
    // The new device's own default key (~/.config/svc/device.pem of its user).
    const pub = (await svcOk(['auth', 'keygen'], { env: deviceEnv })).stdout.trim();
    const r = await svcOk(['auth', 'pair', '--node-url', nodeUrl, '--realm', 'application', '--device-key', pub], { env: adminEnv });
    assert.match(r.stdout, new RegExp(`node id: +${nodeId}`));
    const code = /code: +(\S+)/.exec(r.stdout)?.[1] ?? '';
    const line = r.stdout.split('\n').find((l) => l.trim().startsWith('svc auth pair complete'));
    assert.ok(line, r.stdout);
    const done = await svcOnTerminal(line.trim().split(/\s+/).slice(1), { env: deviceEnv, prompt: 'pairing code: ', answer: code });
    assert.equal(done.code, 0, done.screen);
    assert.match(done.screen, new RegExp(`paired with node ${nodeId}`));
    assert.match(done.screen, /realm: +application/);
    assert.ok(!done.screen.includes(code), 'the code was echoed');
  });

  test('a pairing prepared for one device cannot be completed by another holding the leaked code (exit 1, invalid_pairing_code)', async () => {
    const prepared = await pair(join(tmp.dir, 'intended.pem'));
    const thief = join(tmp.dir, 'thief.pem');
    await keygen(thief, { env: deviceEnv });
    const base = ['auth', 'pair', 'complete', '--node-url', nodeUrl, '--intent', prepared.intent_id, '--code', prepared.code];
    const stolen = await svc([...base, '--key', thief], { env: deviceEnv });
    assert.equal(stolen.code, 1);
    assert.match(stolen.stderr, /\(invalid_pairing_code\)/);
    assert.equal((await svc([...base, '--key', join(tmp.dir, 'intended.pem')], { env: deviceEnv })).code, 0);
  });

  test('svc auth pair without --device-key, or with a malformed one, is a usage error (exit 2)', async () => {
    for (const extra of [[], ['--device-key', 'abc']]) {
      const r = await svc(['auth', 'pair', '--node-url', nodeUrl, ...extra], { env: adminEnv });
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /--device-key/);
    }
    const both = await svc(['auth', 'pair', '--node-url', nodeUrl, '--device-key', 'ab'.repeat(32), '--provider', 'passkeys'], {
      env: adminEnv,
    });
    assert.equal(both.code, 2, both.stderr);
    assert.match(both.stderr, /not both/);
    const stray = await svc(['auth', 'pair', '--node-url', nodeUrl, '--device-key', 'ab'.repeat(32), '--app-url', 'http://x'], {
      env: adminEnv,
    });
    assert.equal(stray.code, 2, stray.stderr);
    const badUrl = await svc(['auth', 'pair', '--node-url', nodeUrl, '--provider', 'passkeys', '--app-url', 'ftp://x'], { env: adminEnv });
    assert.equal(badUrl.code, 2, badUrl.stderr);
    assert.equal(badUrl.stderr.trim().split('\n').length, 1);
  });

  test('svc auth pair --provider for a provider this node does not run is refused with one line naming the provider (exit 2, a bad argument)', async () => {
    const r = await svc(['auth', 'pair', '--node-url', nodeUrl, '--provider', 'passkeys', '--realm', 'application'], { env: adminEnv });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /invalid_request/);
    assert.match(r.stderr, /provider must name a provider this node runs \(none is installed\)/);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  });

  test('a node id that differs from the discovered one is refused (exit 1) and nothing is sent: the intent stays usable', async () => {
    const keyFile = join(tmp.dir, 'mismatch.pem');
    const prepared = await pair(keyFile);
    const other = otherValidNodeId(nodeId);
    const base = [
      'auth',
      'pair',
      'complete',
      '--node-url',
      nodeUrl,
      '--intent',
      prepared.intent_id,
      '--code',
      prepared.code,
      '--key',
      keyFile,
    ];
    const r = await svc([...base, '--node-id', other], { env: deviceEnv });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /refusing to pair/);
    assert.match(r.stderr, new RegExp(nodeId));
    // Nothing was sent: the intent was not even counted as a failure.
    assert.equal((await svc([...base, '--node-id', nodeId], { env: deviceEnv })).code, 0);
  });

  test('a --node-id whose check symbol is wrong is a usage error (exit 2)', async () => {
    const typo = `${nodeId.slice(0, 3)}${nodeId[3] === 'A' ? 'B' : 'A'}${nodeId.slice(4)}`;
    const r = await svc(
      ['auth', 'pair', 'complete', '--node-url', nodeUrl, '--intent', 'int_x', '--code', 'AAAA-AAAA', '--key', 'k.pem', '--node-id', typo],
      { env: deviceEnv },
    );
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /--node-id/);
  });

  test('a wrong code fails with invalid_pairing_code (exit 1); after 5 the intent is burned: invalid_pairing_intent', async () => {
    const keyFile = join(tmp.dir, 'wrong-code.pem');
    const prepared = await pair(keyFile);
    const wrong = prepared.code === 'AAAA-AAAA' ? 'BBBB-BBBB' : 'AAAA-AAAA';
    const base = ['auth', 'pair', 'complete', '--node-url', nodeUrl, '--intent', prepared.intent_id, '--key', keyFile];
    for (let i = 0; i < 5; i++) {
      const r = await svc([...base, '--code', wrong], { env: deviceEnv });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /\(invalid_pairing_code\)/);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    }
    const right = await svc([...base, '--code', prepared.code], { env: deviceEnv });
    assert.equal(right.code, 1);
    assert.match(right.stderr, /\(invalid_pairing_intent\)/);
  });

  test('a replayed completion fails with invalid_pairing_intent', async () => {
    const keyFile = join(tmp.dir, 'replay.pem');
    const prepared = await pair(keyFile, ['--realm', 'application']);
    const args = [
      'auth',
      'pair',
      'complete',
      '--node-url',
      nodeUrl,
      '--intent',
      prepared.intent_id,
      '--code',
      prepared.code,
      '--key',
      keyFile,
    ];
    assert.equal((await svc(args, { env: deviceEnv })).code, 0);
    const again = await svc(args, { env: deviceEnv });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /\(invalid_pairing_intent\)/);
  });

  test('an application-realm device is paired, but the management API refuses its key at sign-in', async () => {
    const keyFile = join(tmp.dir, 'kiosk.pem');
    const prepared = await pair(keyFile, ['--realm', 'application', '--name', 'kiosk']);
    assert.equal(prepared.realm, 'application');
    const done = JSON.parse(
      (
        await svcOk(
          [
            'auth',
            'pair',
            'complete',
            '--node-url',
            nodeUrl,
            '--intent',
            prepared.intent_id,
            '--code',
            prepared.code,
            '--key',
            keyFile,
            '--json',
          ],
          { env: deviceEnv },
        )
      ).stdout,
    );
    assert.equal(done.device.realm, 'application');
    const login = await svc(
      ['auth', 'login', '--key', keyFile, '--url', managementUrl, '--credentials', join(tmp.dir, 'kiosk-creds.json')],
      {
        env: deviceEnv,
      },
    );
    assert.equal(login.code, 1);
    assert.match(login.stderr, /\(invalid_signature\)/);
  });

  test('usage mistakes are exit 2: a missing --intent, a bad --realm, a bad --ttl', async () => {
    assert.equal((await svc(['auth', 'pair', 'complete', '--code', 'AAAA-AAAA', '--key', 'k.pem'], { env: deviceEnv })).code, 2);
    assert.equal((await svc(['auth', 'pair', '--device-key', 'ab'.repeat(32), '--realm', 'admin'], { env: adminEnv })).code, 2);
    assert.equal((await svc(['auth', 'pair', '--device-key', 'ab'.repeat(32), '--ttl', '5m'], { env: adminEnv })).code, 2);
  });

  test('a ttl out of range refused by the node is one line with its code, invalid_request, and a usage error (exit 2)', async () => {
    const r = await svc(['auth', 'pair', '--node-url', nodeUrl, '--device-key', 'ab'.repeat(32), '--ttl', '5'], { env: adminEnv });
    assert.equal(r.code, 2);
    assert.match(r.stderr, /\(invalid_request\)/);
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
  });

  test('pairing without a saved session, or with an unreachable node, fails with one line (exit 1)', async () => {
    const nobody = await svc(['auth', 'pair', '--node-url', nodeUrl, '--device-key', 'ab'.repeat(32)], {
      env: cleanEnv({ HOME: join(tmp.dir, 'nobody'), SVC_CREDENTIALS: join(tmp.dir, 'nobody', 'creds.json') }),
    });
    assert.equal(nobody.code, 1);
    assert.match(nobody.stderr, /not signed in/);
    const unreachable = await svc(['auth', 'pair', '--node-url', 'http://127.0.0.1:1', '--device-key', 'ab'.repeat(32)], { env: adminEnv });
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /cannot reach the node surface at http:\/\/127\.0\.0\.1:1/);
    assert.equal(unreachable.stderr.trim().split('\n').length, 1, unreachable.stderr);
  });
});

/** A well-formed node id (its check symbol right) of another node: one data symbol changed, the check recomputed. */
function otherValidNodeId(id: string): string {
  const alphabet = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  const data = id.slice(0, -1);
  const changed = `${data[0] === '0' ? '1' : '0'}${data.slice(1)}`;
  for (const c of alphabet) {
    const candidate = normalizeNodeId(`${changed}${c}`);
    if (candidate !== null) return candidate;
  }
  throw new Error('no valid id found');
}
