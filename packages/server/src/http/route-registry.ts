import type { FastifyInstance, FastifySchema } from 'fastify';

/** A route as a surface installed it: method, URL pattern and schema. */
export interface RegisteredRoute {
  readonly method: string;
  readonly url: string;
  readonly schema: FastifySchema | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The routes recorded by {@link trackRoutes} (read them with {@link registeredRoutes}). */
    svcRoutes: RegisteredRoute[];
  }
}

/**
 * Records every route later registered on `app` (HEAD routes Fastify adds for GET are left
 * out), so a test can hold the routes a surface serves against its OpenAPI document. Call it
 * before registering routes.
 *
 * @example
 * trackRoutes(app);
 * await app.register(routes);
 * registeredRoutes(app); // [{ method: 'GET', url: '/health', schema: {...} }, ...]
 */
export function trackRoutes(app: FastifyInstance): void {
  const routes: RegisteredRoute[] = [];
  app.decorate('svcRoutes', routes);
  app.addHook('onRoute', (route) => {
    for (const m of Array.isArray(route.method) ? route.method : [route.method]) {
      const method = String(m).toUpperCase();
      if (method !== 'HEAD') routes.push({ method, url: route.url, schema: route.schema });
    }
  });
}

/**
 * The routes registered on `app` since {@link trackRoutes}, in registration order.
 *
 * @throws {TypeError} when `app` was built without {@link trackRoutes}.
 */
export function registeredRoutes(app: FastifyInstance): readonly RegisteredRoute[] {
  if (!app.hasDecorator('svcRoutes')) throw new TypeError('registeredRoutes: the app was built without trackRoutes');
  return app.svcRoutes;
}
