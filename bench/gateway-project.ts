// What the benchmark's gateway processes share (bench/gateway-server.ts, upstream mode, and
// bench/gateway-modules-server.ts, module mode): a real SQLite control store in a temporary
// directory, the auth deps over it, and one application-realm session, signed in through the
// core use cases, whose access token goes to a file (0600; never to a process's output). Every
// request the benchmark sends is authenticated against that store, as `svc serve` does.
// BENCH_USER_ATTRIBUTES=1 gives the signed-in user a name, an email and groups (#27).
import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  type AuthDeps,
  authenticate,
  completePairing,
  createChallenge,
  createSession,
  enrollWithBootstrapToken,
  issueBootstrapToken,
  pairingProofString,
  preparePairing,
  publicKeyHexOf,
  silentLogger,
  updateUser,
} from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import { openSqliteStore } from 'svc-store-sqlite';

/** A gateway's project for the benchmark: its deps, this node's id, and how to take it all down. */
export interface GatewayProject {
  readonly deps: AuthDeps;
  readonly nodeId: string;
  /** Closes the store and removes the directory. */
  close(): Promise<void>;
}

/**
 * A fresh project in a temporary directory: an admin, who pairs one application device; that
 * device signs in to the application realm and its access token is written to `tokenFile`.
 *
 * @example
 * const project = await openGatewayProject('/tmp/x/app.token');
 */
export async function openGatewayProject(tokenFile: string): Promise<GatewayProject> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-gateway-'));
  const store = await openSqliteStore({ file: join(dir, 'control.db') });
  const deps: AuthDeps = {
    store,
    clock: { now: () => Date.now(), monotonic: () => performance.now() },
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: 'prj_01KAQ0000000BENCHGATEWAY0',
    settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS }),
  };
  await store.initProject({ projectId: deps.projectId, createdAt: deps.clock.now() });

  const signHex = (key: KeyObject, message: string) => sign(null, Buffer.from(message, 'utf8'), key).toString('hex');
  /** Signs `key` in to `realm` through the core use cases; returns the access token. */
  const signIn = async (key: { publicKey: KeyObject; privateKey: KeyObject }, realm: 'management' | 'application') => {
    const publicKey = publicKeyHexOf(key.publicKey);
    const chl = await createChallenge(deps, { publicKey, realm });
    const pair = await createSession(deps, { challengeId: chl.id, signature: signHex(key.privateKey, chl.challenge), realm });
    return pair.access_token;
  };

  const admin = generateKeyPairSync('ed25519');
  const bootstrap = await issueBootstrapToken(deps, { recovery: false });
  await enrollWithBootstrapToken(deps, { bootstrapToken: bootstrap.token, publicKey: publicKeyHexOf(admin.publicKey) });
  const adminPrincipal = await authenticate(deps, { token: await signIn(admin, 'management'), realm: 'management' });
  const appKey = generateKeyPairSync('ed25519');
  const appPub = publicKeyHexOf(appKey.publicKey);
  const intent = await preparePairing(deps, { principal: adminPrincipal, realm: 'application', publicKey: appPub });
  const nodeId = 'bench-node';
  await completePairing(deps, {
    nodeId,
    intentId: intent.intent_id,
    code: intent.code,
    publicKey: appPub,
    signature: signHex(appKey.privateKey, pairingProofString({ nodeId, intentId: intent.intent_id, publicKey: appPub })),
  });
  if (process.env.BENCH_USER_ATTRIBUTES === '1') {
    // The user as an operator or a directory describes it (#27): every request then carries
    // Svc-Email, Svc-Name and Svc-Groups, and the assertion its email, name and groups claims.
    const subject = (await deps.store.findDeviceByPublicKey(appPub))?.subject;
    if (subject === undefined) throw new Error('the paired application device is not in the store');
    await updateUser(deps, {
      subject,
      attributes: { name: 'Zoë Ångström 山田', email: 'zoe@bücher.example', email_verified: true, groups: ['admins', 'ops'] },
      actor: { via: 'cli', subject: null, session: null },
      source: 'operator',
    });
  }
  writeFileSync(tokenFile, await signIn(appKey, 'application'), { mode: 0o600 });
  return {
    deps,
    nodeId,
    async close() {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
