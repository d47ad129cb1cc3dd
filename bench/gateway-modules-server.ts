// The gateway in module mode for the benchmark, in its own process like `svc serve` runs it:
// the real gateway app (strip, application-realm bearer checked against a real SQLite control
// store on every request) with {@link moduleHostAttach}: one application module, confined in
// its own process like every module (startModuleHost), serving the same route as the baseline
// (bench/bare-server.ts: `GET /`, a small JSON body), here from the principal. The project is
// bench/gateway-project.ts's; its access token goes to `<token file>`, and the module process's
// pid to `module.pid` beside it (its CPU is part of what a request costs).
//
//   node --import tsx bench/gateway-modules-server.ts <token file>

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { buildGatewayApp, moduleHostAttach, startModuleHost } from '@svc/server';
import { openGatewayProject } from './gateway-project.js';
import { serveUntilSignalled } from './serve.js';

const [tokenFile] = process.argv.slice(2);
if (tokenFile === undefined) throw new Error('usage: gateway-modules-server.ts <token file>');
const work = dirname(tokenFile);
const project = await openGatewayProject(tokenFile);

/** The application module: the baseline's route, answering with the request's principal. */
const packageDir = join(work, 'bench-app');
mkdirSync(packageDir, { recursive: true });
writeFileSync(join(packageDir, 'package.json'), JSON.stringify({ name: 'bench-app', version: '1.0.0', type: 'module' }));
writeFileSync(
  join(packageDir, 'index.js'),
  "export async function svcApp(app) {\n  app.get('/', async (req) => ({ subject: req.principal?.subject, realm: req.principal?.realm }));\n}\n",
);
const host = await startModuleHost({
  modules: [{ name: 'bench-app@1.0.0', packageDir, entry: join(packageDir, 'index.js'), exportName: 'svcApp', dependencyDirs: [] }],
});
writeFileSync(join(work, 'module.pid'), String(host.pid));

const app = await buildGatewayApp({
  deps: project.deps,
  logger: false,
  policy: { publicPaths: [], identityHeaders: [], requirements: [] },
  trustedProxies: [],
  attach: moduleHostAttach(host),
});
app.addHook('onClose', async () => host.close());
await serveUntilSignalled(app, project, 'gateway (module)');
