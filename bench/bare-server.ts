// The baseline: a bare Fastify route returning a constant JSON body, in its own process,
// exactly like the real server runs in its own process.
//
// With the argument `verify-dpop`, the ceiling of a DPoP-checked request instead: the same
// route, after the least any server must do per request with a DPoP proof (RFC 9449), which is
// to parse its header's public key and verify its Ed25519 signature (node:crypto, on the event
// loop, the cheaper way in CPU; keys kept, as the real server keeps them). No claims, no replay
// record, no session: what this machine allows a DPoP check to cost, beside the bare route.
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import Fastify from 'fastify';

const verifyDpop = process.argv[2] === 'verify-dpop';
const keys = new Map<string, KeyObject>();
const keyOf = (x: string): KeyObject => {
  let key = keys.get(x);
  if (key === undefined) {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
    keys.set(x, key);
  }
  return key;
};
/** Whether `proof` (a compact JWS) is signed by the Ed25519 key of its own header's `jwk`. */
const signedByItsKey = (proof: string | string[] | undefined): boolean => {
  if (typeof proof !== 'string') return false;
  const [h = '', p = '', s = ''] = proof.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url').toString('utf8')) as { jwk?: { x?: string } };
  const x = header.jwk?.x;
  return typeof x === 'string' && verify(null, Buffer.from(`${h}.${p}`, 'ascii'), keyOf(x), Buffer.from(s, 'base64url'));
};

const app = Fastify({ logger: false });
app.get('/', async (req, reply) => {
  if (verifyDpop && !signedByItsKey(req.headers.dpop)) return reply.code(401).send({ error: 'invalid_dpop_proof' });
  return { subject: 'sub_baseline', realm: 'management' };
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`bare fastify listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void app.close().then(() => process.exit(0)));
