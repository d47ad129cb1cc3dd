// #26.2: an OpenID Provider that cannot be used (down: nothing listens on its port; or its
// discovery document names another issuer; or it went down after its discovery document was
// cached, so the callback's token request fails) is an upstream outage of that provider module:
// `502 identity_provider_unavailable` with `Retry-After`, naming the module, never a 500 nor a
// 401 counted as a failed attempt. Through `svc serve` with the bundled, signed OIDC provider,
// confined, over real HTTP, against a real OpenID Provider (panva's oidc-provider).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startIdp, type TestIdp } from '../../../provider-oidc/test/support/idp.js';
import { cleanEnv, freePort, initProject, type StartedProcess, startUntilReady, svcOk, tempDir } from '../helpers.js';
import { REPO_ROOT } from '../repo.js';

const ROOT = REPO_ROOT;
const APP_READY = /svc app: application gateway listening on (https?:\/\/\S+)\n/;

describe('an unusable OpenID Provider answers 502 naming the provider module', () => {
  const tmp = tempDir('svc-oidc-faults-');
  const dir = join(tmp.dir, 'demo');
  let served: StartedProcess<string>;
  let gateway: string;
  let mixup: Server;
  let idp: TestIdp;
  const port = freePort();
  const callbackOf = async (alias: string) => `http://localhost:${await port}/.svc/auth/v1/providers/${alias}/callback`;

  before(async () => {
    await initProject(dir);
    // A real OpenID Provider, up when the sign-in begins (its discovery document cached), stopped before the callback.
    idp = await startIdp({ redirectUris: [await callbackOf('corp')] });
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
    const sums = readFileSync(join(ROOT, 'packages/runtime/addons/SHA256SUMS'), 'utf8');
    const digest = /^([0-9a-f]{64}) {2}svc-provider-oidc-/m.exec(sums)?.[1];
    assert.ok(digest, 'the build bundles the OIDC provider');
    const publisher = readFileSync(join(ROOT, 'keys/svc-publisher.pub'), 'utf8').trim();
    const file = join(dir, 'project.edn');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^\{/, `{:svc/trusted-publishers {"svc" "${publisher}"}\n `));
    await svcOk(['package', 'install', '@svc/provider-oidc', '--sha256', digest, dir]);
    const secretFile = join(tmp.dir, 'oidc-client-secret');
    writeFileSync(secretFile, 'a-client-secret-for-nobody\n', { mode: 0o600 });
    const idpSecretFile = join(tmp.dir, 'idp-client-secret');
    writeFileSync(idpSecretFile, `${idp.clientSecret}\n`, { mode: 0o600 });
    const oidc = (issuer: string, clientId = 'svc', secret = secretFile) =>
      `{:package "@svc/provider-oidc" :activate [:svc/auth-provider]
                 :config {:oidc/issuer "${issuer}" :oidc/client-id "${clientId}"
                          :oidc/client-secret #svc/secret "file:${secret}"}}`;
    const mixupIssuer = `http://127.0.0.1:${(mixup.address() as AddressInfo).port}`;
    const edn = readFileSync(file, 'utf8').replace(
      ':svc/modules  {',
      `:svc/modules {:down ${oidc(`http://127.0.0.1:${closedPort}`)}\n :mixup ${oidc(mixupIssuer)}\n :corp ${oidc(idp.issuer, idp.clientId, idpSecretFile)}\n `,
    );
    assert.ok(edn.includes(':mixup') && edn.includes(':corp'), edn);
    writeFileSync(file, edn);
    gateway = `http://localhost:${await port}`;
    served = await startUntilReady(
      ['serve', '--management-listen', '127.0.0.1:0', '--node-listen', '127.0.0.1:0', '--app-listen', `127.0.0.1:${await port}`, dir],
      (out) => APP_READY.exec(out)?.[1] ?? null,
      { env: cleanEnv() },
    );
  });
  after(async () => {
    await served?.stop();
    await new Promise<void>((resolve) => (mixup === undefined ? resolve() : mixup.close(() => resolve())));
    await idp?.close();
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
      // A browser gets a page in words (never the module alias); an API client the problem+json naming it.
      assert.equal(refusalCode(res, text), 'identity_provider_unavailable');
      assert.doesNotMatch(text.replace(/<code>[^<]*<\/code>|href="[^"]*"/g, ''), new RegExp(`\\b${alias}\\b`));
      assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
      assert.equal(res.headers.get('set-cookie'), null, 'no flow was begun');
      const api = await fetch(`${gateway}/.svc/auth/v1/providers/${alias}/begin`, { redirect: 'manual' });
      const problem = (await api.json()) as { code?: string; detail?: string };
      assert.equal(api.status, 502);
      assert.equal(problem.code, 'identity_provider_unavailable');
      assert.match(problem.detail ?? '', new RegExp(`\\b${alias}\\b`), 'the detail names the provider module');
    });
  }

  /** A browser's sign-in with :corp begun at the gateway: its flow cookie, and the `state` the IdP would send back. */
  async function beginCorp(): Promise<{ cookie: string; state: string }> {
    const res = await fetch(`${gateway}/.svc/auth/v1/providers/corp/begin`, { redirect: 'manual' });
    const text = await res.text();
    assert.equal(res.status, 302, text);
    const location = new URL(res.headers.get('location') ?? '');
    assert.equal(location.origin, idp.issuer, 'begin redirects to the IdP');
    const state = location.searchParams.get('state');
    assert.ok(state !== null && state.length >= 20, location.href);
    const cookie = res.headers
      .getSetCookie()
      .map((line) => line.split(';')[0] ?? '')
      .join('; ');
    assert.match(cookie, /svc-flow=/, 'the flow cookie is set');
    return { cookie, state };
  }

  /** The browser coming back to the gateway's :corp callback with `params`. */
  async function callback(cookie: string, params: Record<string, string>): Promise<Response> {
    const url = new URL(await callbackOf('corp'));
    url.search = new URLSearchParams(params).toString();
    return fetch(url, { headers: { cookie, accept: 'text/html,application/xhtml+xml' }, redirect: 'manual' });
  }

  /** A refused callback's code: the browser gets a refusal page, which names it (an outage too: never the module alias). */
  function refusalCode(res: Response, text: string): string | undefined {
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/, text);
    return /<code>([a-z_]+)<\/code>/.exec(text)?.[1];
  }

  /** `provider.signin_failed` events of :corp in the audit trail. */
  async function corpRefusals(): Promise<number> {
    const out = await svcOk(['auth', 'audit', dir, '--json']);
    return out.stdout.split('\n').filter((l) => l.includes('provider.signin_failed') && l.includes('"corp"')).length;
  }

  /** The failed-attempt budget of svc serve: 30 failed attempts per client address unit and window. */
  const BUDGET = 30;

  describe('an OpenID Provider that goes down after its discovery document was cached', () => {
    test('control: with the IdP up, a forged callback (a state the flow did not send) is a 401 refusal, audited and counted', async () => {
      const { cookie, state } = await beginCorp();
      const before = await corpRefusals();
      const forged = `${state.slice(0, -1)}${state.endsWith('A') ? 'B' : 'A'}`;
      const res = await callback(cookie, { code: 'a-forged-code', state: forged, iss: idp.issuer });
      const text = await res.text();
      assert.equal(res.status, 401, text);
      assert.equal(refusalCode(res, text), 'invalid_credential');
      assert.equal(await corpRefusals(), before + 1, 'the refusal is audited as provider.signin_failed');
    });

    test('the IdP stopped after the sign-in began: the callback answers 502 identity_provider_unavailable naming :corp, with Retry-After, not audited, no failed attempt counted', async () => {
      // A sign-in begun while the IdP is up: its discovery document is cached by the provider.
      let flow = await beginCorp();
      await idp.close();
      const before = await corpRefusals();
      // A whole budget's worth of callbacks: were any counted as a failed attempt, the budget
      // (one refusal already counted by the control) would answer the last ones 429.
      for (let i = 1; i <= BUDGET; i++) {
        // Later sign-ins begin from the cached discovery document, the IdP down.
        if (i > 1) flow = await beginCorp();
        const res = await callback(flow.cookie, { code: `a-code-the-idp-issued-${i}`, state: flow.state, iss: idp.issuer });
        const text = await res.text();
        assert.equal(res.status, 502, `callback ${i} of ${BUDGET} with the IdP down: ${text}`);
        assert.equal(refusalCode(res, text), 'identity_provider_unavailable');
        assert.match(text, /<h1>Sign-in is unavailable right now<\/h1>/, 'a page for the person');
        assert.doesNotMatch(text.replace(/<code>[^<]*<\/code>|href="[^"]*"/g, ''), /\bcorp\b/, 'no module alias shown');
        assert.match(res.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/);
        assert.ok(!res.headers.getSetCookie().some((c) => /svc-(access|refresh)=[^;]/.test(c)), 'no session cookie');
      }
      assert.equal(await corpRefusals(), before, 'an outage is not audited as a refusal');
      // The budget has room: a definite refusal (the IdP sent the browser back with an error)
      // is still answered 401, not 429.
      const { cookie } = await beginCorp();
      const denied = await callback(cookie, { error: 'access_denied' });
      const text = await denied.text();
      assert.equal(denied.status, 401, text);
      assert.equal(refusalCode(denied, text), 'invalid_credential');
      assert.equal(await corpRefusals(), before + 1, 'the refusal is audited');
    });
  });
});
