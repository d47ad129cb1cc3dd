import type { AddressInfo } from 'node:net';
import { RuntimeError } from '../errors.js';

/** What {@link listenOn} needs of a surface's app (a Fastify instance, without depending on Fastify here). */
export interface ListeningApp {
  listen(opts: { host: string; port: number }): Promise<unknown>;
  close(): Promise<unknown>;
  readonly server: { address(): AddressInfo | string | null };
}

/**
 * A host as it is written in a URL: IPv6 addresses in brackets.
 *
 * @example
 * urlHost('::1'); // '[::1]'
 */
export function urlHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Makes a surface's app listen on an address already checked, and returns the URL it answers
 * on (the real port when port 0 was asked for). A failure to bind closes the app and is one
 * clear line naming the address, what it was for, why, and the flag and variable that choose
 * another.
 *
 * @example
 * const url = await listenOn(app, { host: '127.0.0.1', port: 0 }, { what: 'the node surface', flag: '--listen', env: 'SVC_NODE_LISTEN' });
 */
export async function listenOn(
  app: ListeningApp,
  listen: { readonly host: string; readonly port: number },
  opts: { readonly what: string | null; readonly flag?: string | undefined; readonly env: string; readonly scheme?: 'http' | 'https' },
): Promise<string> {
  try {
    await app.listen({ host: listen.host, port: listen.port });
  } catch (error) {
    await app.close().catch(() => undefined);
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EADDRINUSE' ? 'the address is already in use' : (error as Error).message;
    throw new RuntimeError(
      `cannot listen on ${urlHost(listen.host)}:${listen.port}${opts.what === null ? '' : ` for ${opts.what}`}: ${why}; choose another address with ${opts.flag === undefined ? '' : `${opts.flag} or `}${opts.env}`,
      { cause: error },
    );
  }
  const address = app.server.address() as AddressInfo;
  return `${opts.scheme ?? 'http'}://${urlHost(listen.host)}:${address.port}`;
}
