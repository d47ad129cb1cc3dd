// The ceiling of the login figure: the same two requests as a complete login
// (`POST /v1/auth/challenges`, then `POST /v1/auth/sessions` with the Ed25519 signature),
// answered by a bare Fastify server that stores nothing. It does what any Ed25519 sign-in
// server must do per login and nothing more: a random challenge kept in a Map, one
// signature verification (node:crypto, on the event loop, the cheaper way in CPU), two
// random tokens and their SHA-256 digests. No store, no audit, no attempt budget, no input
// checks, no logging: what the machine allows a login to cost, in its own process as the
// real server runs, driven by the same load generator in the same round.
import { createHash, createPublicKey, type KeyObject, randomBytes, verify } from 'node:crypto';
import Fastify from 'fastify';

// An Ed25519 SubjectPublicKeyInfo is this prefix and the 32 raw key bytes.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map<string, KeyObject>();
const keyOf = (hex: string): KeyObject => {
  let key = keys.get(hex);
  if (key === undefined) {
    key = createPublicKey({ key: Buffer.concat([SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' });
    keys.set(hex, key);
  }
  return key;
};
const challenges = new Map<string, { publicKey: string; challenge: string }>();
const token = () => randomBytes(32).toString('base64url');

const app = Fastify({ logger: false });
app.post('/v1/auth/challenges', async (req, reply) => {
  const { public_key } = req.body as { public_key: string };
  const id = `chl_${randomBytes(16).toString('hex').slice(0, 26)}`;
  const expiresAt = Date.now() + 60_000;
  const challenge = `svc-auth-v1 challenge prj_floor management ${id} ${randomBytes(16).toString('hex')} ${Math.floor(expiresAt / 1000)}`;
  challenges.set(id, { publicKey: public_key, challenge });
  reply.code(201);
  return { challenge_id: id, challenge, expires_at: new Date(expiresAt).toISOString() };
});
app.post('/v1/auth/sessions', async (req, reply) => {
  const { challenge_id, signature } = req.body as { challenge_id: string; signature: string };
  const c = challenges.get(challenge_id);
  challenges.delete(challenge_id);
  if (c === undefined || !verify(null, Buffer.from(c.challenge, 'utf8'), keyOf(c.publicKey), Buffer.from(signature, 'hex'))) {
    reply.code(401);
    return { type: 'about:blank', title: 'invalid_signature' };
  }
  const access = token();
  const refresh = token();
  createHash('sha256').update(access).digest();
  createHash('sha256').update(refresh).digest();
  return { access_token: access, refresh_token: refresh, token_type: 'Bearer', expires_in: 900 };
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`login floor listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void app.close().then(() => process.exit(0)));
