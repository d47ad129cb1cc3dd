// #24.8: the method a provider session carries (`amr`) must come from what the operator
// trusted, never from what the provider says at run time. A third-party provider package,
// signed by a publisher project.edn trusts, that declares `kind: 'webauthn'` used to get
// sessions with `amr ["hwk", "user"]` and pass a passkey-only `:svc/app-require` rule.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { packAddon } from '@svc/addons/build';
import { ADDON_MANIFEST_FILE } from '@svc/core';
import { bash, cleanEnv, freePort, initProject, run, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';

const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

/** A third-party provider that claims to be a passkey provider and proves whatever user it is told. */
const CLAIMS_WEBAUTHN = `export const acmePasskeys = {
  contractVersion: 1,
  kind: 'webauthn',
  validateConfig: () => [],
  async begin() {
    return { state: { n: 1 }, reply: { kind: 'json', body: { challenge: 'abc' } } };
  },
  credentialIdOf: () => null,
  async finish(_ctx, _config, input) {
    return { identity: { issuer: 'webauthn:localhost', subject: String(input.request.body?.user ?? 'mallory'), claims: {} }, credential: null };
  },
  async health() {
    return { status: 'ok' };
  },
};
`;

describe('a signed third-party provider that declares kind webauthn', () => {
  const tmp = tempDir('svc-provider-amr-');
  const env = cleanEnv({ HOME: tmp.dir });
  const dir = join(tmp.dir, 'project');
  let app: { url: string; close(): Promise<void> };
  let served: StartedProcess<string>;
  let gateway: string;

  before(async () => {
    await initProject(dir, { env });
    const pem = join(tmp.dir, 'acme.pem');
    const key = await run('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pem], { env });
    assert.equal(key.code, 0, key.stderr);
    chmodSync(pem, 0o600);
    const acme = (await bash(`openssl pkey -in "${pem}" -pubout -outform DER | tail -c 32 | xxd -p -c 64`)).stdout.trim();
    assert.match(acme, /^[0-9a-f]{64}$/);
    // The package: signed by acme, whom the operator trusts (under the name "svc", even: a name
    // is only the operator's label, never what decides).
    const pkg = join(tmp.dir, 'pkg');
    mkdirSync(join(pkg, 'dist'), { recursive: true });
    writeFileSync(
      join(pkg, 'package.json'),
      JSON.stringify({ name: 'acme-passkeys', version: '1.0.0', type: 'module', files: ['dist', ADDON_MANIFEST_FILE] }),
    );
    writeFileSync(join(pkg, 'dist', 'index.js'), CLAIMS_WEBAUTHN);
    writeFileSync(
      join(pkg, ADDON_MANIFEST_FILE),
      `${JSON.stringify({
        schema: 1,
        name: 'acme-passkeys',
        version: '1.0.0',
        exports: { 'svc/auth-provider': { entry: './dist/index.js', export: 'acmePasskeys' } },
        operations: [],
        native: null,
        abi: { store_contract: 4, node_module_version: null, napi: null },
      })}\n`,
    );
    const out = join(tmp.dir, 'out');
    mkdirSync(out);
    const packed = await packAddon(pkg, out);
    await svcOk(['package', 'sign', packed.archive, '--key', pem], { env });
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${acme}"}\n `));
    await svcOk(['package', 'install', packed.archive, '--sha256', packed.sha256, dir], { env });

    const server = createServer((_req: IncomingMessage, res: ServerResponse) => res.end('the application'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    app = {
      url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
      close: () => new Promise((resolve) => server.close(() => resolve())),
    };
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    const edn = readFileSync(file, 'utf8')
      .replace(/^\{/, `{:svc/app-upstream "${app.url}"\n :svc/app-require {"/hardware/*" {:amr ["hwk"]}}\n `)
      .replace(
        ':svc/modules  {',
        `:svc/modules {:acme {:package "acme-passkeys" :activate [:svc/auth-provider]
                       :config {:provider/jit true :provider/allowed-issuers ["webauthn:localhost"]}}
                `,
      );
    assert.ok(edn.includes(':acme'), edn);
    writeFileSync(file, edn);
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (stdout) => APP_READY.exec(stdout)?.[1] ?? null,
      { env },
    );
  });
  after(async () => {
    await served?.stop();
    await app?.close();
    tmp.cleanup();
  });

  /** One browser-like request to the gateway: its own origin, the cookies so far. */
  async function post(path: string, body: unknown, cookies: Map<string, string>): Promise<Response> {
    const res = await fetch(`${gateway}${path}`, {
      method: 'POST',
      headers: {
        origin: gateway,
        'content-type': 'application/json',
        cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      body: JSON.stringify(body),
      redirect: 'manual',
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = (pair ?? '').indexOf('=');
      cookies.set((pair ?? '').slice(0, eq), (pair ?? '').slice(eq + 1));
    }
    return res;
  }

  test('a third-party provider that says it is a passkey provider does not get a passkey amr: a passkey-only rule refuses its session', async () => {
    const cookies = new Map<string, string>();
    const begun = await post('/.svc/auth/v1/providers/acme/begin', { intent: 'signup' }, cookies);
    assert.equal(begun.status, 200, await begun.clone().text());
    const finished = await post('/.svc/auth/v1/providers/acme/finish', { user: 'mallory' }, cookies);
    assert.equal(finished.status, 200, await finished.clone().text());
    assert.equal(((await finished.json()) as { outcome: string }).outcome, 'session');
    const cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    // Signed in: the application is reached on a path without requirements...
    const plain = await fetch(`${gateway}/plain`, { headers: { cookie } });
    assert.equal(plain.status, 200, await plain.clone().text());
    // ...but the passkey-only path refuses it: the session's method is not a hardware key.
    const hardware = await fetch(`${gateway}/hardware/keys`, { headers: { cookie } });
    const text = await hardware.text();
    assert.equal(hardware.status, 403, `the passkey-only path answered: ${text}`);
    assert.equal((JSON.parse(text) as { code?: string }).code, 'insufficient_claims');
  });
});
