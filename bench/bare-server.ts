// The baseline: a bare Fastify route returning a constant JSON body, in its own process,
// exactly like the real server runs in its own process.
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/', async () => ({ subject: 'sub_baseline', realm: 'management' }));
const address = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`bare fastify listening on ${address}\n`);
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void app.close().then(() => process.exit(0)));
