// #26.2: an OpenID Provider that cannot be used (down: nothing listens on its port; or its
// discovery document names another issuer) is an upstream outage of that provider module:
// `502 identity_provider_unavailable` with `Retry-After`, naming the module, never a 500.
// Through `svc serve` with the bundled, signed OIDC provider, confined, over real HTTP.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, freePort, initProject, type StartedProcess, startUntilReady, svcOk, tempDir } from './helpers.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

describe('an unusable OpenID Provider answers 502 naming the provider module', () => {
  const tmp = tempDir('svc-oidc-faults-');
  const dir = join(tmp.dir, 'demo');
  let served: StartedProcess<string>;
  let gateway: string;
  let mixup: Server;

  before(async () => {
    await initProject(dir);
    // A discovery document that names another issuer than the one configured (a mix-up, or a
    // misconfigured proxy in front of the IdP).
    mixup = createServer((req, res) => {
      const { port } = mixup.address() as AddressInfo;
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          issuer: `http://127.0.0.1:${port}/someone-else`,
          authorization_endpoint: `http://127.0.0.1:${port}/authorize`,
          token_endpoint: `http://127.0.0.1:${port}/token`,
          jwks_uri: `http://127.0.0.1:${port}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          path: req.url,
        }),
      );
    });
    await new Promise<void>((resolve) => mixup.listen(0, '127.0.0.1', resolve));
    const closedPort = await freePort();
    const sums = readFileSync(join(ROOT, 'packages/cli/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-oidc-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the OIDC provider');
    const publisher = readFileSync(join(ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-oidc', '--sha256', digest, dir]);
    const secretFile = join(tmp.dir, 'oidc-client-secret');
    writeFileSync(secretFile, 'a-client-secret-for-nobody\n', { mode: 0o600 });
    const oidc = (issuer: string) =>
      `{:package "@svc/provider-oidc" :activate [:svc/auth-provider]
                 :config {:oidc/issuer "${issuer}" :oidc/client-id "svc"
                          :oidc/client-secret #svc/secret "file:${secretFile}"}}`;
    const mixupIssuer = `http://127.0.0.1:${(mixup.address() as AddressInfo).port}`;
    const edn = readFileSync(file, 'utf8').replace(
      ':svc/modules  {',
      `:svc/modules {:down ${oidc(`http://127.0.0.1:${closedPort}`)}\n :mixup ${oidc(mixupIssuer)}\n `,
    );
    assert.ok(edn.includes(':mixup'), edn);
    writeFileSync(file, edn);
    const port = await freePort();
    gateway = `http://localhost:${port}`;
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
  });
  after(async () => {
    await served?.stop();
    await new Promise<void>((resolve) => (mixup === undefined ? resolve() : mixup.close(() => resolve())));
    tmp.cleanup();
  });

  for (const [alias, what] of [
    ['down', 'an OpenID Provider that is down (nothing listens on its port)'],
    ['mixup', 'an OpenID Provider whose discovery document names another issuer'],
  ] as const) {
    test(`${what}: a browser's sign-in answers 502 identity_provider_unavailable naming :${alias}, with Retry-After, never a 500`, async () => {
      const res = await fetch(`${gateway}/.svc/auth/v1/providers/${alias}/begin`, {
        headers: { accept: 'text/html,application/xhtml+xml' },
        redirect: 'manual',
      });
      const text = await res.text();
      assert.equal(res.status, 502, text);
      const problem = JSON.parse(text) as { code?: string; detail?: string };
      assert.equal(problem.code, 'identity_provider_unavailable');
      assert.match(problem.detail ?? '', new RegExp(`\\b${alias}\\b`), 'the detail names the provider module');
      assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
      assert.equal(res.headers.get('set-cookie'), null, 'no flow was begun');
    });
  }
});
