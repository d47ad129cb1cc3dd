// The gateway in module mode for the benchmark, in its own process like `svc serve` runs it:
// the real gateway app (strip, application-realm bearer checked against a real SQLite control
// store on every request) with {@link moduleAttach} of one application module serving the
// same route as the baseline (bench/bare-server.ts: `GET /`, a small JSON body), here from the
// principal. The project is bench/gateway-project.ts's; its access token goes to `<token file>`.
//
//   node --import tsx bench/gateway-modules-server.ts <token file>

import { buildGatewayApp, moduleAttach } from '@svc/server';
import type { FastifyPluginAsync } from 'fastify';
import { openGatewayProject, serveUntilSignalled } from './gateway-project.js';

const [tokenFile] = process.argv.slice(2);
if (tokenFile === undefined) throw new Error('usage: gateway-modules-server.ts <token file>');
const project = await openGatewayProject(tokenFile);

/** The application module: the baseline's route, answering with the request's principal. */
const plugin: FastifyPluginAsync = async (app) => {
  app.get('/', async (req) => ({ subject: req.principal?.subject, realm: req.principal?.realm }));
};

const app = await buildGatewayApp({
  deps: project.deps,
  logger: false,
  policy: { publicPaths: [], identityHeaders: [], requirements: [] },
  trustedProxies: [],
  attach: moduleAttach([{ name: 'bench-app@1.0.0', plugin }]),
});
await serveUntilSignalled(app, project, 'gateway (module)');
