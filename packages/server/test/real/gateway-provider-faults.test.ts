// #26.2: a provider that fails (its confined process killed mid-ceremony, or stopped with
// SIGSTOP) is the service's outage, not the user's wrong credential: `503
// provider_unavailable` with `Retry-After`, naming the provider, never a 401 counted as a
// failed attempt (nor a 500), and no `provider.signin_failed` refusal in the audit trail.
// Through real HTTP, with a real confined provider process.
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type { ProviderHandle } from '@svc/core';
import { startProviderHost } from '@svc/provider-host';
import { createFailureLimiter } from '../../src/http/failure-limiter.js';
import { startGateway } from '../support/gateway-harness.js';
import { type NodeHarness, startNodeHarness } from '../support/node-harness.js';

const PACKAGE_DIR = new URL('../fixtures/faulty-passkeys', import.meta.url).pathname;
/** The host's bound on one call: the stopped provider is given up on after this. */
const CALL_TIMEOUT_MS = 2_000;

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly retryAfter: string | null;
}

describe('provider faults at the gateway', () => {
  let provider: ProviderHandle;
  let h: { gatewayBase: string; deps: NodeHarness['deps']; close(): Promise<void> };
  const stopped: number[] = [];

  before(async () => {
    provider = await startProviderHost({
      name: 'passkeys',
      packageDir: PACKAGE_DIR,
      entry: 'index.mjs',
      exportName: 'provider',
      dependencyDirs: [],
      config: {},
      policy: {
        name: 'passkeys',
        realms: ['application'],
        allowedIssuers: ['webauthn:localhost'],
        jit: { enabled: true, emailDomains: [] },
      },
      packageName: 'svc-provider-faulty-passkeys',
      packageVersion: '1.0.0',
      signer: 'test',
      callTimeoutMs: CALL_TIMEOUT_MS,
      restartDelayMs: 50,
    });
  });
  // A fresh store and gateway per test: each starts with an untouched attempt budget.
  beforeEach(async () => {
    const node = await startNodeHarness();
    try {
      // One counted failure per address is the whole budget: a fault counted as a failed
      // attempt would make the next refusal a 429.
      const limiter = createFailureLimiter({ clock: node.deps.clock, store: node.deps.store, scope: 'app-signin', maxFailures: 1 });
      const g = await startGateway(node, { providers: [provider], limiter });
      h = {
        gatewayBase: g.base,
        deps: node.deps,
        async close() {
          await g.app.close();
          await node.close();
        },
      };
    } catch (err) {
      await node.close();
      throw err;
    }
  });
  afterEach(async () => {
    await h.close();
  });
  after(async () => {
    for (const pid of stopped) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // Already gone: the host killed it.
      }
    }
    await provider?.close();
  });

  /** One browser request to the gateway's provider routes: same origin, with the cookies so far. */
  async function post(path: string, body: unknown, cookies: Map<string, string>): Promise<Answer> {
    // Bounded: a request the service lets hang fails here, naming what it waited for.
    const signal = AbortSignal.timeout(10 * CALL_TIMEOUT_MS);
    const res = await fetch(`${h.gatewayBase}/.svc/auth/v1/providers/passkeys/${path}`, {
      method: 'POST',
      headers: {
        origin: h.gatewayBase,
        'content-type': 'application/json',
        cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; '),
      },
      body: JSON.stringify(body),
      signal,
    }).catch((err: unknown) => {
      throw signal.aborted
        ? new Error(`${path} did not answer within ${10 * CALL_TIMEOUT_MS} ms (the host bounds a call by ${CALL_TIMEOUT_MS} ms)`)
        : err;
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return { status: res.status, body: (await res.json()) as Record<string, unknown>, retryAfter: res.headers.get('retry-after') };
  }

  /** Asserts `a` is the provider outage answer: 503, its code, Retry-After, and the provider named. */
  function assertUnavailable(a: Answer, what: string): void {
    assert.equal(a.status, 503, `${what}: ${JSON.stringify(a.body)}`);
    assert.equal(a.body.code, 'provider_unavailable', what);
    assert.match(a.retryAfter ?? '', /^[1-9][0-9]*$/, `${what}: Retry-After`);
    assert.match(String(a.body.detail), /\bpasskeys\b/, `${what}: the detail names the provider`);
  }

  async function refusals(): Promise<number> {
    const events = await h.deps.store.listAuditEvents({ afterSeq: 0, limit: 1000 });
    return events.filter((e) => e.type === 'provider.signin_failed').length;
  }

  /** Waits (at most 20 s) until the host has replaced the stopped process and begin answers again. */
  async function serving(): Promise<void> {
    const deadline = performance.now() + 20_000;
    for (;;) {
      const a = await post('begin', { intent: 'signup' }, new Map());
      if (a.status === 200) return;
      assertUnavailable(a, 'begin while the host replaces the stopped process');
      if (performance.now() > deadline) assert.fail('the provider host did not replace the stopped process within 20 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The attempt budget of this address is untouched: one wrong proof is refused (401, counted), the next is 429. */
  async function assertNoFailedAttemptCounted(): Promise<void> {
    for (const expected of [401, 429]) {
      const cookies = new Map<string, string>();
      const begun = await post('begin', { intent: 'signup' }, cookies);
      assert.equal(begun.status, 200, JSON.stringify(begun.body));
      const refused = await post('finish', { refuse: true }, cookies);
      assert.equal(refused.status, expected, `a wrong proof after the fault (budget: one failure): ${JSON.stringify(refused.body)}`);
    }
  }

  test('the provider process killed during a passkey finish: 503 provider_unavailable naming it, no refusal audited, no failed attempt counted', async () => {
    const cookies = new Map<string, string>();
    const begun = await post('begin', { intent: 'signup' }, cookies);
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    const before = await refusals();
    assertUnavailable(await post('finish', { die: true }, cookies), 'finish while the process is killed');
    assert.equal(await refusals(), before, 'no provider.signin_failed refusal for an outage');
    await assertNoFailedAttemptCounted();
  });

  test('the provider process stopped (SIGSTOP): begin and finish answer 503 provider_unavailable after the call bound, naming it, no failed attempt counted', async () => {
    const cookies = new Map<string, string>();
    const begun = await post('begin', { intent: 'signup' }, cookies);
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    const pid = Number(begun.body.pid);
    assert.ok(Number.isSafeInteger(pid) && pid > 0, `the fixture reports its pid: ${JSON.stringify(begun.body)}`);
    process.kill(pid, 'SIGSTOP');
    stopped.push(pid);
    const before = await refusals();
    // Both in flight on the stopped process at once.
    const [finish, begin] = await Promise.all([post('finish', { user: 'alice' }, cookies), post('begin', { intent: 'signup' }, new Map())]);
    assertUnavailable(finish, 'finish on the stopped process');
    assertUnavailable(begin, 'begin on the stopped process');
    assert.equal(await refusals(), before, 'no provider.signin_failed refusal for an outage');
    await serving();
    await assertNoFailedAttemptCounted();
  });

  /** Begins a ceremony and finishes it with `body`: the finish's answer. */
  async function beginAndFinish(body: Record<string, unknown>): Promise<Answer> {
    const cookies = new Map<string, string>();
    const begun = await post('begin', { intent: 'signup' }, cookies);
    assert.equal(begun.status, 200, JSON.stringify(begun.body));
    return post('finish', body, cookies);
  }

  test("a refusal not marked as the user's (response_refused) while the provider's health reports down: 502 identity_provider_unavailable naming it, not audited, no failed attempt counted", async () => {
    const before = await refusals();
    const a = await beginAndFinish({ refuse: true, code: 'response_refused', health: 'down' });
    assert.equal(a.status, 502, JSON.stringify(a.body));
    assert.equal(a.body.code, 'identity_provider_unavailable');
    assert.match(a.retryAfter ?? '', /^[1-9][0-9]*$/, 'Retry-After');
    assert.match(String(a.body.detail), /\bpasskeys\b/, 'the detail names the provider');
    assert.equal(await refusals(), before, 'no provider.signin_failed refusal for an outage');
    await assertNoFailedAttemptCounted();
  });

  test('control: the same refusal while the health reports ok is a 401 refusal, audited and counted', async () => {
    const before = await refusals();
    const a = await beginAndFinish({ refuse: true, code: 'response_refused' });
    assert.equal(a.status, 401, JSON.stringify(a.body));
    assert.equal(a.body.code, 'invalid_credential');
    assert.equal(await refusals(), before + 1, 'the refusal is audited');
    // Counted: the budget (one failure) is spent, the next attempt is 429.
    const b = await beginAndFinish({ refuse: true });
    assert.equal(b.status, 429, JSON.stringify(b.body));
  });

  test('a definite refusal (code_refused) while the health reports down is a 401 refusal, not an outage', async () => {
    const before = await refusals();
    const a = await beginAndFinish({ refuse: true, code: 'code_refused', health: 'down' });
    assert.equal(a.status, 401, JSON.stringify(a.body));
    assert.equal(a.body.code, 'invalid_credential');
    assert.equal(await refusals(), before + 1, 'the refusal is audited');
  });

  test("a refusal whose health check then hangs is answered as the refusal it was, once the host's call bound ends the health call", async () => {
    const before = await refusals();
    const a = await beginAndFinish({ refuse: true, code: 'response_refused', health: 'hang' });
    assert.equal(a.status, 401, JSON.stringify(a.body));
    assert.equal(a.body.code, 'invalid_credential');
    assert.equal(await refusals(), before + 1, 'the refusal is audited');
  });
});
