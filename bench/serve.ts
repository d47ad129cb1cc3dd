// How every bench server process listens and stops.
import type { FastifyInstance } from 'fastify';

/**
 * Listens on a loopback port, prints `<label> listening on <url>` (what the harness waits for),
 * and closes the app and then `closable` (a project, a pool) on SIGINT/SIGTERM.
 *
 * @example
 * await serveUntilSignalled(app, project, 'gateway (module)');
 */
export async function serveUntilSignalled(app: FastifyInstance, closable: { close(): Promise<void> | void }, label: string): Promise<void> {
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  process.stdout.write(`${label} listening on ${address}\n`);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(
      signal,
      () =>
        void app
          .close()
          .then(() => closable.close())
          .finally(() => process.exit(0)),
    );
  }
}
