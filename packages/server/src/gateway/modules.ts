import type { Principal } from '@svc/core';
import { MAX_REQUEST_BODY_BYTES } from '@svc/core/settings';
import type { ModuleHost } from './module-host.js';
import type { GatewayAttach } from './options.js';
import { DEFAULT_UPSTREAM_TIMEOUTS, type UpstreamTimeouts, upstreamAttach } from './upstream.js';

/**
 * Module mode of the application gateway: the attach that forwards every request that passed the
 * gateway's strip and authenticate steps to the application modules, which run confined in their
 * own process ({@link startModuleHost}), never in the service's (contract, Application gateway,
 * Attach, Module mode; spec rule 1: a package loaded into the application cannot replace
 * identity). The forwarding is the upstream mode's proxy over the host's private unix socket:
 * hop-by-hop headers dropped, `X-Forwarded-For`/`-Proto`/`-Host` set fresh, bodies streamed,
 * `TRACE` refused, websockets relayed once identity settled them; instead of the `Svc-*` headers
 * and a signed assertion, each request carries the host's per-start secret and the principal as
 * data, which the child turns into the frozen, read-only, non-configurable `request.principal`.
 *
 * A child that crashed or is restarting answers `502 upstream_unavailable`; one that does not
 * answer within `timeouts.responseMs` answers `504 upstream_timeout`, and the host is asked to
 * check it is alive (a child whose event loop is stuck is killed and restarted).
 *
 * `maxConnections` bounds the connections to the module process, as upstream mode's (default 128).
 *
 * @example
 * const host = await startModuleHost({ modules });
 * const app = await buildGatewayApp({ deps, policy, trustedProxies: [], attach: moduleHostAttach(host) });
 */
export function moduleHostAttach(
  host: ModuleHost,
  timeouts: UpstreamTimeouts = DEFAULT_UPSTREAM_TIMEOUTS,
  maxConnections?: number,
): GatewayAttach {
  return upstreamAttach(
    {
      ...(maxConnections === undefined ? {} : { maxConnections }),
      // The host name is never resolved: the connection goes to the socket.
      upstream: new URL('http://svc-modules.invalid'),
      socketPath: host.socketPath,
      // The child's own limit: refused here before the body is relayed, never raced (see `bodyLimit`).
      bodyLimit: MAX_REQUEST_BODY_BYTES,
      identityHeaders: (_req, principal: Principal | null) => host.forwardHeaders(principal),
      onFailure: (err) => {
        if (err.code === 'upstream_timeout') host.checkAlive();
      },
    },
    timeouts,
  );
}
