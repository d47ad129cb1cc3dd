// The baseline of the gateway's upstream mode: a bare reverse proxy with no authentication, built
// with the same proxy library (@fastify/http-proxy: reply-from on undici), in its own process,
// like the gateway runs in its own. `node --import tsx bench/bare-proxy.ts <upstream URL> [sign]`.
//
// With `sign`: the same bare proxy doing only what an assertion cannot do without, one Ed25519
// signature per request over a message of an assertion's size, sent on as a header of an
// assertion's size (`svc-assertion`). No claims, no key set, no authentication: what any proxy
// that signs each request costs on this machine, the ceiling of the gateway's signed figure.
import { generateKeyPairSync, sign } from 'node:crypto';
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const [upstream, mode] = process.argv.slice(2);
if (upstream === undefined || (mode !== undefined && mode !== 'sign')) throw new Error('usage: bare-proxy.ts <upstream URL> [sign]');
const app = Fastify({ logger: false });
const { privateKey } = generateKeyPairSync('ed25519');
// An assertion's signing input: its header and claims, base64url (about 600 characters).
const input = Buffer.from('e'.repeat(600));
await app.register(httpProxy, {
  upstream,
  disableRequestLogging: true,
  ...(mode === 'sign'
    ? {
        replyOptions: {
          rewriteRequestHeaders: (_req, headers) => ({
            ...headers,
            'svc-assertion': `${input.toString('latin1')}.${sign(null, input, privateKey).toString('base64url')}`,
          }),
        },
      }
    : {}),
});
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`bare proxy${mode === 'sign' ? ' (signing)' : ''} listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void app.close().then(() => process.exit(0)));
