// A gateway in upstream mode in a process of its own, so a test can watch its memory alone:
// `node --import tsx upstream-gateway-child.ts <upstream URL>` prints `listening on <base>`.
import { startProxyGateway } from './upstream-harness.js';

const upstream = process.argv[2];
if (upstream === undefined) throw new Error('usage: upstream-gateway-child.ts <upstream URL>');
const gw = await startProxyGateway(new URL(upstream));
process.stdout.write(`listening on ${gw.base}\n`);
process.on('SIGTERM', () => void gw.close().then(() => process.exit(0)));
