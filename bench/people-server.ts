// The gateway and the management API of one project of the `people` benchmark (bench/people.ts),
// in their own process as `svc serve` runs them: the real gateway app behind `:svc/app-routes`
// with one route, `http://people.bench.test` -> `<upstream URL>`, that requires the group
// `ops` (`:require {:groups ["ops"]}`), and the real management API, both over the SQLite
// control store `<control db>` that bench/people.ts prepared (project, devices, users, sessions).
//
//   node --import tsx bench/people-server.ts <upstream URL> <control db> <bearer cache sessions>
//
// Prints `people listening on <gateway URL> management <management URL>`.
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { type AppRoute, type AuthDeps, silentLogger } from '@svc/core';
import { DEFAULT_AUTH_SETTINGS } from '@svc/core/settings';
import { buildGatewayApp, buildManagementApp, upstreamAttach } from '@svc/server';
import { openSqliteStore } from 'svc-store-sqlite';

/** The project id bench/people.ts initialises the store with. */
export const PEOPLE_PROJECT_ID = 'prj_01KAQ0000000BENCHPEOP1E0';
/** The host the benchmark's requests name: the one route's origin. */
export const PEOPLE_HOST = 'people.bench.test';
/** The group the route requires. */
export const REQUIRED_GROUP = 'ops';

const [upstream, file, cacheArg] = process.argv.slice(2);
if (import.meta.url === `file://${process.argv[1]}`) {
  if (upstream === undefined || file === undefined || cacheArg === undefined || !/^\d+$/.test(cacheArg)) {
    throw new Error('usage: people-server.ts <upstream URL> <control db> <bearer cache sessions>');
  }
  const store = await openSqliteStore({ file, bearerCacheSessions: Number(cacheArg) });
  const deps: AuthDeps = {
    store,
    clock: { now: () => Date.now(), monotonic: () => performance.now() },
    random: (n) => randomBytes(n),
    log: silentLogger,
    projectId: PEOPLE_PROJECT_ID,
    settings: Object.freeze({ ...DEFAULT_AUTH_SETTINGS }),
  };
  const to = new URL(upstream).origin;
  const route: AppRoute = {
    index: 0,
    from: `http://${PEOPLE_HOST}`,
    origin: `http://${PEOPLE_HOST}`,
    prefix: null,
    to,
    publicPaths: [],
    requirement: { path: '/*', subjects: null, groups: [REQUIRED_GROUP], emailDomains: null, amr: null, maxAuthAgeSeconds: null },
    audience: to,
  };
  const gateway = await buildGatewayApp({
    deps,
    logger: false,
    policy: { publicPaths: [], identityHeaders: [], requirements: [], routes: [route] },
    trustedProxies: [],
    attach: upstreamAttach({
      upstream: 'routes',
      identityHeaders: (_req, p) => (p === null ? {} : { 'svc-subject': p.subject, 'svc-realm': p.realm }),
    }),
  });
  const management = await buildManagementApp({ deps, logger: false });
  // The server's time of each management request, from its arrival to its response's head, as
  // `Server-Timing: app;dur=<ms>, cpu;dur=<ms>`: the elapsed time and this process's CPU time
  // over it (the listings are sent one at a time, so that CPU is the request's). On a shared
  // machine the elapsed time also holds the time the process waited for a core.
  management.server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    const writeHead = res.writeHead;
    res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
      const cpu = process.cpuUsage(cpu0);
      this.setHeader(
        'server-timing',
        `app;dur=${(performance.now() - t0).toFixed(3)}, cpu;dur=${((cpu.user + cpu.system) / 1000).toFixed(3)}`,
      );
      return writeHead.apply(this, args);
    } as ServerResponse['writeHead'];
  });
  const gatewayUrl = await gateway.listen({ host: '127.0.0.1', port: 0 });
  const managementUrl = await management.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`people listening on ${gatewayUrl} management ${managementUrl}\n`);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(
      signal,
      () =>
        void Promise.all([gateway.close(), management.close()])
          .then(() => store.close())
          .finally(() => process.exit(0)),
    );
  }
}
