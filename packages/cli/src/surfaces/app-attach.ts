import { type GatewayAttach, moduleAttach } from '@svc/server';
import { loadAppModules } from '../app-modules.js';
import { CliError } from '../cli-error.js';
import type { SurfaceContext } from './surface.js';

/**
 * What serves the application behind the gateway, and the keys `GET /.svc/jwks.json`
 * publishes. THE HOOK POINT of the application surface: upstream mode (`:svc/app-upstream`,
 * gw-upstream's `upstreamAttach` with gw-assert's `Svc-Assertion` signer) and module mode
 * (`project.edn` modules that activate `:svc/app`, gw-modules' attach) plug in here, and
 * nowhere else in the surface.
 */
export interface AppAttachment {
  /** Absent: every authenticated, non-reserved path answers 404 (no application configured). */
  readonly attach?: GatewayAttach;
  /** Absent: `{"keys":[]}`. */
  readonly jwks?: () => { readonly keys: readonly object[] };
  /** Released when the surface closes (e.g. key-file watchers). */
  close?(): Promise<void>;
}

/**
 * Decides what the gateway attaches after identity, from the project's configuration.
 *
 * Upstream mode is refused rather than faked until the upstream attach is merged: a gateway
 * that authenticates and then answers 404 where the operator expects a proxy would fail
 * silently.
 *
 * @example
 * const attachment = await appAttachment(ctx);
 * await buildGatewayApp({ ...options, ...attachment });
 */
export async function appAttachment(ctx: SurfaceContext): Promise<AppAttachment> {
  const { app } = ctx.project.config;
  if (app.upstream !== null) {
    // TODO(lead): upstream mode, once gw-upstream (upstreamAttach, @svc/server) and gw-assert
    // (the Svc-Assertion signer and its key files) are merged. Return
    //   { attach: upstreamAttach({ upstream: new URL(app.upstream), identityHeaders }), jwks, close }
    // where identityHeaders(req, principal) sets Svc-Subject/-Realm/-Session/-Device and
    // Svc-Assertion signed by gw-assert's signer (aud = app.audience ?? app.upstream, iss = node
    // id), jwks publishes the signer's public keys, and close stops any key-file watcher.
    throw new CliError(
      `${ctx.project.file}: :svc/app-upstream is set, but this build cannot proxy to an upstream yet; remove :svc/app-upstream or set SVC_APP_LISTEN=off`,
    );
  }
  // Module mode: every module that activates :svc/app, verified before any of its code runs
  // (config validation already refuses :svc/app-upstream together with :svc/app modules).
  const modules = await loadAppModules(ctx.project);
  if (modules.length > 0) return { attach: moduleAttach(modules) };
  return {};
}
