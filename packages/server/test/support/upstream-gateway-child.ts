// The real gateway in upstream mode in a process of its own, so a test can watch its memory
// alone: `node --import tsx upstream-gateway-child.ts <upstream URL> <token file>` signs one
// application device in, writes its `Authorization` value to <token file> (0600) and prints
// `listening on <base>`.
import { writeFileSync } from 'node:fs';
import { startProxyGateway } from './upstream-harness.js';

const [upstream, tokenFile] = process.argv.slice(2);
if (upstream === undefined || tokenFile === undefined) throw new Error('usage: upstream-gateway-child.ts <upstream URL> <token file>');
const gw = await startProxyGateway(new URL(upstream));
writeFileSync(tokenFile, gw.bearer, { mode: 0o600 });
process.stdout.write(`listening on ${gw.base}\n`);
process.on('SIGTERM', () => void gw.close().then(() => process.exit(0)));
