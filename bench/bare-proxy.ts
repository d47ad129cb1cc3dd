// The baseline of the gateway's upstream mode: a bare reverse proxy with no authentication, built
// with the same proxy library (@fastify/http-proxy: reply-from on undici), in its own process,
// like the gateway runs in its own. `node --import tsx bench/bare-proxy.ts <upstream URL>`.
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const upstream = process.argv[2];
if (upstream === undefined) throw new Error('usage: bare-proxy.ts <upstream URL>');
const app = Fastify({ logger: false });
await app.register(httpProxy, { upstream, disableRequestLogging: true });
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`bare proxy listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void app.close().then(() => process.exit(0)));
