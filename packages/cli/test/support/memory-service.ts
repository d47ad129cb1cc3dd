import { randomBytes } from 'node:crypto';
import { loadDeviceKey } from '@svc/client';
import {
  type AuthDeps,
  auditDraft,
  completePairing,
  issueBootstrapToken,
  makePrincipal,
  newId,
  pairingProofString,
  preparePairing,
  rfc3339,
  silentLogger,
} from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import { defaultUser } from '@svc/core/store';
import { buildGatewayApp, buildManagementApp } from '@svc/server';
import { createMemoryStore } from '@svc/store-testkit';

/**
 * The management API and an application gateway on 127.0.0.1 over one in-memory store (the
 * reference store) and the real clock, in the test process: what the in-process tests of the
 * API commands talk to, with the defaults of a real service (DPoP-bound refresh included).
 */
export interface MemoryService {
  readonly deps: AuthDeps;
  /** `http://127.0.0.1:<port>` of the management API. */
  readonly url: string;
  /** `http://127.0.0.1:<port>` of the application gateway. */
  readonly appUrl: string;
  /** Enrolls the key in `keyFile` as a new management device; its subject. */
  enrollAdmin(keyFile: string): Promise<{ deviceId: string }>;
  /** Pairs the key in `keyFile` as an application device (of `subject`, or a new one). */
  pairApplication(keyFile: string, subject?: string): Promise<{ deviceId: string; subject: string }>;
  close(): Promise<void>;
}

const NODE_ID = 'node_memory_service';

async function listen(app: Awaited<ReturnType<typeof buildManagementApp>>): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

/**
 * Starts a {@link MemoryService}.
 *
 * @example
 * const service = await startMemoryService();
 * await service.enrollAdmin(keyFile);
 */
export async function startMemoryService(): Promise<MemoryService> {
  const store = createMemoryStore();
  const deps: AuthDeps = {
    store,
    clock: { now: () => Date.now(), monotonic: () => performance.now() },
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000CLIMEMORYSVC00',
    settings: DEFAULT_AUTH_SETTINGS,
  };
  await store.initProject({ projectId: deps.projectId, createdAt: Date.now() });
  const management = await buildManagementApp({ deps, logger: false });
  const gateway = await buildGatewayApp({
    deps,
    logger: false,
    policy: { publicPaths: [], identityHeaders: [], requirements: [] },
    trustedProxies: [],
  });
  const url = await listen(management);
  const appUrl = await listen(gateway);
  const operator = makePrincipal({
    subject: newId('subject', deps.clock, deps.random),
    realm: 'management',
    session: 'operator-test',
    device: 'operator-test',
    claims: { amr: ['control-dir'], auth_time: rfc3339(Date.now()), exp: rfc3339(Date.now() + 60_000) },
  });
  // A management principal is a user: completing the intents it prepares requires one, active.
  await store.createUser(
    defaultUser({ subject: operator.subject, realm: 'management', now: Date.now() }),
    auditDraft(deps, 'user.created', { realm: 'management', subject: operator.subject }),
  );
  return {
    deps,
    url,
    appUrl,
    async enrollAdmin(keyFile) {
      const key = loadDeviceKey(keyFile);
      const { token } = await issueBootstrapToken(deps, { recovery: true });
      const res = await fetch(`${url}/v1/auth/enroll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ bootstrap_token: token, public_key: key.publicKeyHex }),
      });
      if (res.status !== 201) throw new Error(`enroll failed: ${await res.text()}`);
      const { device } = (await res.json()) as { device: { id: string } };
      return { deviceId: device.id };
    },
    async pairApplication(keyFile, subject) {
      const key = loadDeviceKey(keyFile);
      const intent = await preparePairing(deps, {
        principal: operator,
        realm: 'application',
        publicKey: key.publicKeyHex,
        ...(subject === undefined ? {} : { subject }),
      });
      const proof = pairingProofString({ nodeId: NODE_ID, intentId: intent.intent_id, publicKey: key.publicKeyHex });
      const paired = await completePairing(deps, {
        nodeId: NODE_ID,
        intentId: intent.intent_id,
        code: intent.code,
        publicKey: key.publicKeyHex,
        signature: key.sign(proof),
      });
      return { deviceId: paired.device.id, subject: intent.subject };
    },
    async close() {
      await gateway.close();
      await management.close();
      await store.close();
    },
  };
}
