import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import type { Server as HttpsServer } from 'node:https';
import { isAbsolute, resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { AppGatewayConfig, AppTlsConfig, ProjectConfig } from '@svc/core/config';
import { buildGatewayApp, cleartextExposed, DEFAULT_BRAND, instrumentStore, type PageBrand, type ServiceMetrics } from '@svc/server';
import type { Logger } from 'pino';
import { RuntimeError } from '../errors.js';
import { appAttachment } from './app-attach.js';
import { listenOn } from './listen-on.js';
import type { Surface } from './surface.js';

/** A certificate and key pair read from the `:svc/app-tls` files, checked to belong together. */
export interface AppTlsPair {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** The SHA-256 fingerprint of the leaf certificate (`AB:CD:...`), as `openssl x509 -fingerprint -sha256` prints it. */
  readonly fingerprint: string;
  /** When the leaf certificate expires (its `notAfter`). */
  readonly validTo: string;
}

/**
 * Reads the `:svc/app-tls` certificate chain and private key (relative paths from the project
 * directory) and checks that they make a usable pair (`tls.createSecureContext` accepts them:
 * PEM, a key that matches the certificate). Called at start and on every SIGHUP.
 *
 * @throws {RuntimeError} one line naming the file and what is wrong with it.
 * @example
 * const pair = readAppTls(project.config.app.tls, project.dir);
 */
export function readAppTls(tls: AppTlsConfig, projectDir: string): AppTlsPair {
  const path = (p: string) => (isAbsolute(p) ? p : resolve(projectDir, p));
  const read = (p: string, what: string) => {
    try {
      return readFileSync(path(p));
    } catch (error) {
      throw new RuntimeError(`cannot read the ${what} ${path(p)} of :svc/app-tls: ${(error as Error).message}`, { cause: error });
    }
  };
  const cert = read(tls.cert, 'certificate');
  const key = read(tls.key, 'private key');
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(cert);
    createSecureContext({ cert, key });
  } catch (error) {
    throw new RuntimeError(
      `the :svc/app-tls pair ${path(tls.cert)} and ${path(tls.key)} is not usable: ${(error as Error).message}; give a PEM certificate chain and its PEM private key`,
      { cause: error },
    );
  }
  if (!leaf.checkPrivateKey(createPrivateKey(key))) {
    throw new RuntimeError(`the :svc/app-tls private key ${path(tls.key)} does not belong to the certificate ${path(tls.cert)}`);
  }
  return { cert, key, fingerprint: leaf.fingerprint256, validTo: leaf.validTo };
}

/** Whether a file others can read holds the TLS private key (warned about, not refused: containers mount secrets 0644). */
function othersCanRead(path: string): boolean {
  try {
    return (statSync(path).mode & 0o077) !== 0;
  } catch {
    return false;
  }
}

/** The digest that names a pair in the log without showing the key. */
function pairLogFields(pair: AppTlsPair): Record<string, string> {
  return {
    cert_sha256: pair.fingerprint,
    valid_to: pair.validTo,
    key_digest: createHash('sha256').update(pair.key).digest('hex').slice(0, 12),
  };
}

const CLEARTEXT_WARNING =
  'the application gateway listens on a network address over plain HTTP: application bearer tokens and refresh tokens travel in clear text. Set :svc/app-tls {:cert "..." :key "..."} in project.edn, or put a TLS-terminating proxy in front and name it in :svc/app-trusted-proxies';

/**
 * Reloads the gateway's TLS pair from its files (what SIGHUP asks `svc` for): a pair that cannot
 * be read, or that the server refuses, is logged and the previous one keeps serving.
 */
function reloadTls(server: HttpsServer, tls: AppTlsConfig, projectDir: string, log: Logger): void {
  let pair: AppTlsPair;
  try {
    pair = readAppTls(tls, projectDir);
  } catch (error) {
    log.error(
      { event: 'app.tls_reload_failed', err: { message: (error as Error).message } },
      'SIGHUP: the new TLS certificate and key were not loaded; still serving the previous pair',
    );
    return;
  }
  try {
    server.setSecureContext({ cert: pair.cert, key: pair.key });
  } catch (error) {
    log.error(
      { event: 'app.tls_reload_failed', err: { message: (error as Error).message } },
      'SIGHUP: the new TLS pair was refused; still serving the previous one',
    );
    return;
  }
  log.info({ event: 'app.tls_reloaded', ...pairLogFields(pair) }, 'SIGHUP: application gateway TLS certificate reloaded');
}

/**
 * How the gateway's pages present the company: `:svc/app-brand` (its accent and logo over the
 * pages' defaults), and the passkey provider's `:webauthn/rp-name`, the site's name when no
 * brand is set.
 */
function pageBrandOf(config: ProjectConfig): { brand?: PageBrand; siteName: string | null } {
  let siteName: string | null = null;
  for (const provider of config.providers) {
    const rpName = provider.settings.get(':webauthn/rp-name');
    if (typeof rpName === 'string' && rpName.trim() !== '') {
      siteName = rpName.trim();
      break;
    }
  }
  const brand = config.app.brand;
  if (brand === null) return { siteName };
  return { brand: { name: brand.name, accent: brand.accent ?? DEFAULT_BRAND.accent, logo: brand.logo }, siteName };
}

/**
 * The origins a browser signed in at `:svc/app-auth-origin` may be handed to: the auth origin,
 * every route's origin (`:svc/app-routes`), and the gateway's public origin.
 */
function handoffOrigins(config: AppGatewayConfig): readonly string[] {
  const origins = [config.authOrigin, ...(config.routes ?? []).map((r) => r.origin), config.publicOrigin];
  return [...new Set(origins.filter((o): o is string => o !== null))];
}

/**
 * The application gateway as a surface of the foreground service: the gateway of
 * `buildGatewayApp` with the route policy, trusted proxies and TLS of `project.edn`, and what
 * {@link appAttachment} attaches behind it. It may bind a network address; plain HTTP on one,
 * with neither `:svc/app-tls` nor `:svc/app-trusted-proxies`, gets a loud warning on stderr and
 * in the log. With TLS, SIGHUP reloads the certificate and key (a bad new pair keeps the old).
 *
 * @example
 * const running = await appSurface({ host: '0.0.0.0', port: 8443 }, { flag: '--app-listen' }).start(ctx);
 */
export function appSurface(
  listen: { readonly host: string; readonly port: number },
  opts: { readonly flag?: string | undefined; readonly metrics?: ServiceMetrics | undefined },
): Surface {
  return {
    usesProviders: true,
    kind: 'application',
    async start(ctx) {
      const { project, deps: base, log } = ctx;
      const config = project.config.app;
      const metrics = opts.metrics;
      const deps = metrics === undefined ? base : { ...base, store: instrumentStore(base.store, metrics) };
      const pair = config.tls === null ? null : readAppTls(config.tls, project.dir);
      if (config.tls !== null && othersCanRead(isAbsolute(config.tls.key) ? config.tls.key : resolve(project.dir, config.tls.key))) {
        log.warn(
          { event: 'app.tls_key_readable', key: config.tls.key },
          'the TLS private key of :svc/app-tls is readable by others; chmod 600 it',
        );
      }
      const attachment = await appAttachment(ctx);
      const app = await buildGatewayApp({
        deps,
        logger: log,
        ...(metrics === undefined ? {} : { metrics }),
        policy: {
          publicPaths: config.publicPaths,
          identityHeaders: config.identityHeaders,
          requirements: config.requirements,
          ...(config.routes === undefined ? {} : { routes: config.routes }),
        },
        trustedProxies: config.trustedProxies,
        connectionLimits: ctx.connections.application,
        ...(config.publicOrigin === null ? {} : { publicOrigin: config.publicOrigin }),
        ...(pair === null ? {} : { https: { cert: pair.cert, key: pair.key } }),
        ...(attachment.jwks === undefined ? {} : { jwks: attachment.jwks }),
        ...(attachment.attach === undefined ? {} : { attach: attachment.attach }),
        providers: ctx.providers,
        ...(config.authOrigin === null ? {} : { sso: { authOrigin: config.authOrigin, origins: handoffOrigins(config) } }),
        ...pageBrandOf(project.config),
      }).catch(async (error: unknown) => {
        // The module process is already running: it does not outlive a gateway that failed to build.
        await attachment.close?.().catch(() => undefined);
        throw error;
      });
      let url: string;
      try {
        url = await listenOn(app, listen, {
          what: 'the application gateway',
          flag: opts.flag,
          env: 'SVC_APP_LISTEN',
          scheme: pair === null ? 'http' : 'https',
        });
      } catch (error) {
        await attachment.close?.().catch(() => undefined);
        throw error;
      }
      if (pair !== null) log.info({ event: 'app.tls_loaded', ...pairLogFields(pair) }, 'application gateway TLS certificate loaded');
      if (cleartextExposed(listen.host, { tls: pair !== null, trustedProxies: config.trustedProxies })) {
        ctx.notice(`WARNING: ${CLEARTEXT_WARNING} (${url})`);
        log.warn({ event: 'app_gateway_cleartext', url }, CLEARTEXT_WARNING);
      }
      log.info(
        {
          event: 'listening',
          surface: 'application',
          url,
          mode: config.routes !== undefined ? 'routes' : config.upstream !== null ? 'upstream' : attachment.attach ? 'modules' : 'none',
          ...(config.routes === undefined ? {} : { routes: config.routes.length }),
        },
        'application gateway listening',
      );
      return {
        url,
        reload() {
          if (config.tls !== null) reloadTls(app.server as unknown as HttpsServer, config.tls, project.dir, log);
        },
        async close() {
          await app.close();
          await attachment.close?.();
        },
      };
    },
  };
}
