// libpq's multi-host connection strings and `target_session_attrs`, which node-postgres lacks:
// `postgres://u@h1:5432,h2:5433/db?target_session_attrs=read-write` tries the hosts in order and
// keeps the first that accepts the session (for read-write: one that is not a standby), so the
// nodes follow a failover to a promoted standby by themselves.
import pg from 'pg';

/** The session kinds the control store can work with (it writes): libpq's `any`, `read-write` and `primary`. */
export const TARGET_SESSION_ATTRS = ['any', 'read-write', 'primary'] as const;

/** Which server a connection may stay on (libpq's `target_session_attrs`). */
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

/** One `host:port` of a host list. */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/** A connection string split into its hosts, each with a one-host string of its own. */
export interface ConnectionTargets {
  /** The hosts in the order they are tried. */
  readonly hosts: readonly HostPort[];
  /** One single-host connection string per host (what node-postgres understands), `target_session_attrs` removed. */
  readonly urls: readonly string[];
  readonly attrs: TargetSessionAttrs;
}

const DEFAULT_PORT = 5432;

/**
 * Splits a libpq connection URI (`postgres[ql]://[user[:password]@][host[:port]][,...][/db][?params]`)
 * into its hosts, as libpq does: each host takes its own port, or the default. Throws a
 * `TypeError` (no part of the string in it) for a string that is not such a URI, a bad port or
 * a `target_session_attrs` the store cannot use.
 *
 * @example
 * const t = splitConnectionString('postgres://svc@db1:5432,db2:5433/svc?target_session_attrs=read-write');
 * // t.hosts: [{host: 'db1', port: 5432}, {host: 'db2', port: 5433}]; t.attrs: 'read-write'
 */
export function splitConnectionString(connectionString: string, defaultPort: number = DEFAULT_PORT): ConnectionTargets {
  const m = /^(postgres(?:ql)?:\/\/)([^/?#]*)([^?#]*)(\?[^#]*)?$/.exec(connectionString);
  if (m === null) throw new TypeError('expected a postgres://user@host:port/database URL');
  const [, scheme = '', authority = '', path = '', query = ''] = m;
  const at = authority.lastIndexOf('@');
  const userinfo = at === -1 ? '' : authority.slice(0, at + 1);
  const hostList = at === -1 ? authority : authority.slice(at + 1);
  const params = new URLSearchParams(query.slice(1));
  const attrs = params.get('target_session_attrs') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(attrs)) {
    throw new TypeError(
      `target_session_attrs must be one of ${TARGET_SESSION_ATTRS.join(', ')} (the store writes), not ${JSON.stringify(attrs)}`,
    );
  }
  params.delete('target_session_attrs');
  const rest = `${path}${params.size > 0 ? `?${params.toString()}` : ''}`;
  const hosts: HostPort[] = [];
  const texts: string[] = [];
  for (const spec of hostList.split(',')) {
    // `[v6]:port`, `[v6]`, `host:port`, `host` or empty (libpq's default host).
    const hm = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]*)(?::(\d*))?$/.exec(spec);
    if (hm === null) throw new TypeError(`a host of the connection string is not host[:port]: ${JSON.stringify(spec)}`);
    const hostText = hm[1] === '' ? 'localhost' : (hm[1] as string);
    const port = hm[2] === undefined || hm[2] === '' ? defaultPort : Number(hm[2]);
    if (!Number.isInteger(port) || port < 1 || port > 65_535)
      throw new TypeError(`a port of the connection string is not 1 to 65535: ${JSON.stringify(hm[2])}`);
    hosts.push({ host: hostText.replace(/^\[(.*)\]$/, '$1'), port });
    texts.push(`${hostText}:${port}`);
  }
  return { hosts, urls: texts.map((t) => `${scheme}${userinfo}${t}${rest}`), attrs: attrs as TargetSessionAttrs };
}

/**
 * The error when no host of the list accepts a session of the wanted kind. Like the driver's own
 * errors it carries a SQLSTATE, 08001 (sqlclient_unable_to_establish_sqlconnection), so the store
 * classifies it as a lost server (`connection`, 503) and it never reaches a caller as itself.
 */
export function noHostError(message: string): Error & { readonly code: string } {
  return Object.assign(new Error(message), { name: 'NoHostError', code: '08001' });
}

/** `transaction_read_only` (or recovery) says this server cannot take the store's writes. */
async function unsuitable(client: pg.Client, attrs: TargetSessionAttrs): Promise<string | null> {
  if (attrs === 'read-write') {
    const r = await client.query<{ transaction_read_only: string }>('SHOW transaction_read_only');
    return r.rows[0]?.transaction_read_only === 'off' ? null : 'read-only (a standby)';
  }
  if (attrs === 'primary') {
    const r = await client.query<{ recovery: boolean }>('SELECT pg_is_in_recovery() AS recovery');
    return r.rows[0]?.recovery === false ? null : 'in recovery (a standby)';
  }
  return null;
}

/**
 * Which host of the list new connections go to. It remembers the host the last good connection
 * reached; when a connection there fails, is lost or finds the server read-only, it forgets it,
 * and the next connection tries the hosts in order again (libpq's semantics), each bounded by
 * the connect timeout. Nothing is retried in a loop: an operation that meets no suitable host
 * fails at once with a `connection` fault (503), and the next one tries again.
 */
export class HostSelector {
  readonly targets: ConnectionTargets;
  #current: number | undefined;

  constructor(targets: ConnectionTargets) {
    this.targets = targets;
  }

  /** The index of the host to try first. */
  get first(): number {
    return this.#current ?? 0;
  }

  /** Remembers host `i` as the one that took a good session. */
  chose(i: number): void {
    this.#current = i;
  }

  /** Forgets host `i` (a failed, lost or read-only connection there), so the next connection tries them all in order. */
  forget(i: number): void {
    if (this.#current === i) this.#current = undefined;
  }

  /** Whether host `i` is the one remembered. */
  remembered(i: number): boolean {
    return this.#current === i;
  }
}

/**
 * A node-postgres `Client` class for a pool (its `Client` option) that connects the libpq way:
 * to the host the selector remembers, or else to each host in order until one accepts a session
 * of the wanted kind. A node-postgres client connects only once, so the hosts before the one it
 * keeps are tried with short-lived probe clients; the client then connects to the winner and
 * checks it again (the server may have changed in between).
 *
 * @example
 * const pool = new pg.Pool({ ...config, Client: multiHostClient(new HostSelector(splitConnectionString(url))) });
 */
export function multiHostClient(selector: HostSelector): typeof pg.Client {
  const { hosts, attrs } = selector.targets;
  class MultiHostClient extends pg.Client {
    #host = -1;
    #config: pg.ClientConfig;

    constructor(config?: string | pg.ClientConfig) {
      super(config);
      this.#config = typeof config === 'string' ? { connectionString: config } : { ...(config ?? {}) };
      // A connection lost later (the primary killed, restarted or demoted) sends the next one
      // through the host list again.
      this.on('error', () => {
        if (this.#host !== -1) selector.forget(this.#host);
      });
    }

    /** Host `i` accepts a session of the wanted kind: connects a throwaway client there to find out. */
    async #probe(i: number): Promise<string | null> {
      const h = hosts[i] as HostPort;
      // With this client's own credentials and settings (what its connection string said), on host i.
      const own = this as unknown as { user: string; database: string; password: string | null; ssl: pg.ClientConfig['ssl'] };
      const probe = new pg.Client({
        ...this.#config,
        connectionString: undefined,
        host: h.host,
        port: h.port,
        user: own.user,
        database: own.database,
        ...(own.password === null ? {} : { password: own.password }),
        ssl: own.ssl,
      });
      probe.on('error', () => undefined);
      try {
        await probe.connect();
        return await unsuitable(probe, attrs);
      } catch (err) {
        return `unreachable (${(err as Error).message || (err as { code?: string }).code || 'error'})`;
      } finally {
        await probe.end().catch(() => undefined);
      }
    }

    /** The host this client should connect to: the remembered one, else the first suitable in order. */
    async #pick(): Promise<number> {
      if (hosts.length === 1 || selector.remembered(selector.first)) return selector.first;
      const refusals: string[] = [];
      for (let i = 0; i < hosts.length; i++) {
        const why = await this.#probe(i);
        if (why === null) return i;
        refusals.push(`${(hosts[i] as HostPort).host}:${(hosts[i] as HostPort).port} ${why}`);
      }
      throw noHostError(`no PostgreSQL host accepts a ${attrs} session: ${refusals.join('; ')}`);
    }

    async #connectSomewhere(): Promise<void> {
      const i = await this.#pick();
      const h = hosts[i] as HostPort;
      // The pool's connect timeout may have fired during the probes: it destroys the socket.
      if ((this as unknown as { connection: { stream: { destroyed: boolean } } }).connection.stream.destroyed)
        throw noHostError('timeout expired while choosing a PostgreSQL host');
      this.host = h.host;
      this.port = h.port;
      this.#host = i;
      try {
        await super.connect();
      } catch (err) {
        selector.forget(i);
        throw err;
      }
      const why = await unsuitable(this as unknown as pg.Client, attrs).catch((err: unknown) => {
        selector.forget(i);
        throw err;
      });
      if (why !== null) {
        selector.forget(i);
        await this.end().catch(() => undefined);
        throw noHostError(`the PostgreSQL host ${h.host}:${h.port} is ${why}, not ${attrs}`);
      }
      selector.chose(i);
    }

    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error) => void): void;
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | undefined {
      const done = this.#connectSomewhere().then(() => this as unknown as pg.Client);
      if (callback === undefined) return done;
      done.then(
        () => callback(null as unknown as Error),
        (err: Error) => callback(err),
      );
      return undefined;
    }
  }
  return MultiHostClient as unknown as typeof pg.Client;
}
