import type { Server } from 'node:http';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { GatewayAttach } from './options.js';

/**
 * An application module of module mode: the `svc/app` export of a pinned package (a Fastify
 * plugin), by the name the operator knows it under (`name@version`, or the module alias).
 */
export interface AppModule {
  readonly name: string;
  readonly plugin: FastifyPluginAsync;
  /** The plugin's options (the CLI passes `{ config }`, the module's frozen `:config` map); default `{}`. */
  readonly options?: Readonly<Record<string, unknown>>;
}

/** fastify-plugin's mark: a plugin with it runs in the registering context instead of its own. */
const SKIP_OVERRIDE = Symbol.for('skip-override');

/**
 * The raw server events that carry a connection or a request to a handler. Their listeners are
 * fixed when the modules are attached: a module can add, prepend or remove none of them, so no
 * application code sees a request before the gateway's header hygiene and identity. `upgrade`
 * is not among them: the gateway's (sealed) `emit` settles identity for every upgrade before any
 * listener sees it, so a module may serve websockets (reading `upgradePrincipal(req)`).
 */
export const SEALED_SERVER_EVENTS: readonly string[] = Object.freeze([
  'request',
  'checkContinue',
  'checkExpectation',
  'connect',
  'connection',
  'secureConnection',
  'clientError',
]);

const sealed = new WeakSet<object>();

/**
 * Whether `plugin` is marked with fastify-plugin's `skip-override` (it would share the context it
 * is registered in instead of getting its own).
 *
 * @example
 * isSkipOverride(fp(async () => {})); // true
 */
export function isSkipOverride(plugin: unknown): boolean {
  return typeof plugin === 'function' && (plugin as unknown as Record<symbol, unknown>)[SKIP_OVERRIDE] === true;
}

/**
 * Fixes which listeners the raw server has for {@link SEALED_SERVER_EVENTS}, and its `emit`
 * (the gateway's header hygiene wraps it): from now on `on`, `prependListener`,
 * `removeListener`, `removeAllListeners` (any form), assigning `emit` or `_events`, and the
 * same through `EventEmitter.prototype` all throw instead of letting code see a request before
 * the hygiene, answer one without identity, or drop the hygiene. Other events (`listening`,
 * `close`, `error`, TLS session events) stay free. Idempotent.
 *
 * Node's own internals are strict-mode code, so a refused change throws rather than failing
 * silently; Node never changes these listeners after the server is built. This complements the
 * header hygiene's own seal (which dispatches `request`, `checkContinue`, `checkExpectation`
 * and `connect` only to the listeners present before the attach): it also covers the
 * connection events, whose listeners could write a response onto the socket before any request
 * is parsed, and makes every attempt fail loudly instead of being ignored.
 *
 * @example
 * sealServerEvents(app.server);
 */
export function sealServerEvents(server: Server): void {
  if (sealed.has(server)) return;
  const target = server as unknown as { _events: Record<string | symbol, unknown>; emit: Server['emit'] };
  // The events object itself: its sealed entries become read-only and non-configurable, arrays
  // of several listeners frozen (push/unshift/splice throw), absent ones pinned as absent.
  const events = target._events;
  for (const name of SEALED_SERVER_EVENTS) {
    const current = events[name];
    if (Array.isArray(current)) Object.freeze(current);
    Object.defineProperty(events, name, { value: current, writable: false, configurable: false, enumerable: current !== undefined });
  }
  Object.defineProperty(server, '_events', { value: events, writable: false, configurable: false, enumerable: false });
  Object.defineProperty(server, 'emit', { value: target.emit, writable: false, configurable: false, enumerable: false });
  sealed.add(server);
}

/**
 * Module mode of the application gateway: the attach that registers each application module
 * (spec rule 1: identity is established before application modules run, and a package loaded
 * into the application cannot replace it). Each module runs in its own encapsulated context
 * below the gateway's, so everything it adds (hooks of any kind, routes, decorators, error and
 * not-found handlers, and whatever fastify-plugin plugins it registers) runs after the gateway's
 * strip and identity hooks, with `request.principal` already defined read-only. Before the first
 * module runs, the raw server's request-carrying listeners and its `emit` are sealed
 * ({@link sealServerEvents}), so a module that reaches `app.server` or `request.raw.socket.server`
 * cannot get in front of the hygiene or remove it. The module is called as a function inside a
 * plain plugin of its own, so a `skip-override` mark could not lift it anyway; such a module is
 * refused outright, as a module that asks to share the gateway's context.
 *
 * What this cannot stop, in-process, is written in docs/security-model.md ("Application
 * modules"): a module is code running with the service's rights.
 *
 * @throws {TypeError} when a module's plugin is not a function, is marked `skip-override`, or two
 *   modules share a name.
 * @example
 * const app = await buildGatewayApp({ deps, policy, trustedProxies: [], attach: moduleAttach(await loadAppModules(project)) });
 */
export function moduleAttach(modules: readonly AppModule[]): GatewayAttach {
  const names = new Set<string>();
  for (const m of modules) {
    if (typeof m.plugin !== 'function')
      throw new TypeError(`application module ${m.name}: its svc/app export is not a Fastify plugin function`);
    if (isSkipOverride(m.plugin)) {
      throw new TypeError(
        `application module ${m.name}: its svc/app export is marked skip-override (fastify-plugin), which asks to share the gateway's context; export the plain plugin`,
      );
    }
    if (names.has(m.name)) throw new TypeError(`application module ${m.name} is listed twice`);
    names.add(m.name);
  }
  const list = Object.freeze([...modules]);
  return async (app: FastifyInstance) => {
    sealServerEvents(app.server);
    for (const m of list) {
      const run = async (scope: FastifyInstance): Promise<void> => {
        try {
          await callPlugin(m.plugin, scope, m.options ?? {});
        } catch (error) {
          throw new Error(`application module ${m.name} failed to load: ${(error as Error).message}`, { cause: error });
        }
      };
      Object.defineProperty(run, Symbol.for('fastify.display-name'), { value: `svc/app ${m.name}` });
      await app.register(run);
    }
  };
}

/** Calls a Fastify plugin directly, async or callback style. */
function callPlugin(plugin: FastifyPluginAsync, scope: FastifyInstance, options: object): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => (err ? reject(err) : resolve());
    let result: unknown;
    try {
      result = (plugin as unknown as (i: FastifyInstance, o: object, d: (err?: Error) => void) => unknown).call(
        scope,
        scope,
        options,
        done,
      );
    } catch (error) {
      reject(error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof (result as Promise<void>).then === 'function') {
      (result as Promise<void>).then(() => resolve(), reject);
    } else if (plugin.length < 3) resolve();
  });
}
