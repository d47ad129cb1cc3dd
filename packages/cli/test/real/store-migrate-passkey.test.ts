// A passkey made while the project ran on SQLite signs in after the project moved to PostgreSQL
// (`svc auth store migrate`): the link (its credential id, public key and counter) moved with
// the user, and the same virtual authenticator in a real Chromium signs in as the same subject.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { cleanEnv, freePort, initProject, keygen, type StartedProcess, startUntilReady, svc, svcOk, tempDir } from '../helpers.js';
import { launchBrowser, pageWithAuthenticator, REPO_ROOT } from '../repo.js';
import { bundledSha256, createSchemas, PG_URL } from '../support/store-projects.js';

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

/** The application behind the gateway: answers with the identity headers it received. */
async function echoApp(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const seen = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith('svc-') && k !== 'svc-assertion'));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(seen));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe('a passkey survives a move from SQLite to PostgreSQL', () => {
  const tmp = tempDir('svc-migrate-passkey-');
  const schemas = createSchemas();
  const running: StartedProcess<string>[] = [];
  after(async () => {
    for (const p of running) await p.stop();
    try {
      await schemas.dispose();
    } finally {
      tmp.cleanup();
    }
  });

  test('sign up with a passkey on SQLite, migrate, switch :auth/store, and the same passkey signs in as the same subject in Chromium', async () => {
    const dir = join(tmp.dir, 'demo');
    const env = cleanEnv();
    const init = await initProject(dir);
    await svcOk(['auth', 'enroll', init.bootstrap_token, await keygen(join(tmp.dir, 'admin.pem')), dir]);
    const app = await echoApp();
    try {
      const sums = readFileSync(join(REPO_ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
      const digest = /^([0-9a-f]{64}) {2}svc-provider-webauthn-/m.exec(sums)?.[1];
      assert.ok(digest, 'the build bundles the WebAuthn provider');
      const publisher = readFileSync(join(REPO_ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
      const file = join(dir, 'project.edn');
      writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
      await svcOk(['package', 'install', '@svc/provider-webauthn', '--sha256', digest, dir]);
      await svcOk(['package', 'install', 'svc-store-postgres', '--sha256', bundledSha256('svc-store-postgres'), dir]);
      const port = await freePort();
      const gateway = `http://localhost:${port}`;
      const schema = schemas.fresh();
      writeFileSync(
        file,
        readFileSync(file, 'utf8')
          .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n `)
          .replace(
            ':svc/modules  {',
            `:svc/modules {:passkeys {:package "@svc/provider-webauthn" :activate [:svc/auth-provider]
                           :config {:webauthn/rp-id "localhost" :webauthn/rp-name "Demo"
                                    :webauthn/origins ["${gateway}"] :provider/jit true}}
               :pg {:package "svc-store-postgres" :activate [:svc/store]
                    :config {:store/url ${JSON.stringify(PG_URL)} :store/schema ${JSON.stringify(schema)}
                             :store/pool-size 2 :store/allow-unauthenticated true}}
                `,
          ),
      );
      const serve = async (): Promise<StartedProcess<string>> => {
        const served = await startUntilReady(
          ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
          (out) => APP_READY.exec(out)?.[1] ?? null,
          { env },
        );
        running.push(served);
        return served;
      };

      const browser = await launchBrowser();
      try {
        const { page } = await pageWithAuthenticator(browser);
        let served = await serve();
        await page.goto(`${gateway}/whoami`);
        assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
        await page.fill('#display-name', 'Ann Example');
        await page.click('button[data-intent="signup"]');
        await page.waitForURL(`${gateway}/whoami`);
        const before = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string>;
        assert.match(before['svc-device'] ?? '', /^lnk_/, 'signed in with the passkey');
        const jwksBefore = await (await fetch(`${gateway}/.svc/jwks.json`)).json();
        await served.stop();

        // On SQLite without a key-encryption key the assertion keys are kept in the clear; a
        // shared store keeps them sealed only: the move is refused until the KEK is set, and
        // then seals them on the way (plaintext-keys-into-a-shared-store).
        const unsealed = await svc(['auth', 'store', 'migrate', dir, '--to', 'pg'], { env });
        assert.equal(unsealed.code, 1, unsealed.stdout);
        assert.match(unsealed.stderr, /:svc\/key-encryption-key/);
        writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, '{:svc/key-encryption-key #svc/secret "env:SVC_TEST_KEK"\n '));
        env.SVC_TEST_KEK = randomBytes(32).toString('base64');
        const moved = await svc(['auth', 'store', 'migrate', dir, '--to', 'pg'], { env });
        assert.equal(moved.code, 0, moved.stderr);
        assert.match(moved.stdout, /1 links/);
        writeFileSync(file, readFileSync(file, 'utf8').replace(':auth/store :store', ':auth/store :pg'));

        served = await serve();
        assert.deepEqual(await (await fetch(`${gateway}/.svc/jwks.json`)).json(), jwksBefore, 'the same assertion keys, now sealed');
        // Sessions were not copied: the browser is asked to sign in again, and its passkey does it.
        await page.goto(`${gateway}/whoami`);
        assert.match(new URL(page.url()).pathname, /^\/\.svc\/auth\/v1\/login/);
        await page.click('button[data-intent="signin"]');
        await page.waitForURL(`${gateway}/whoami`);
        const afterMove = JSON.parse((await page.textContent('body')) ?? '') as Record<string, string>;
        assert.equal(afterMove['svc-subject'], before['svc-subject']);
        assert.equal(afterMove['svc-device'], before['svc-device']);
        assert.equal(decodeURIComponent(afterMove['svc-name'] ?? ''), 'Ann Example');
        await served.stop();
      } finally {
        await browser.close();
      }
    } finally {
      await app.close();
    }
  });
});
