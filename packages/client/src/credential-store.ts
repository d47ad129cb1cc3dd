import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import type { TokenPairJson } from '@svc/core';

/** What a signed-in device keeps between commands. Secret: the file is owner-only. */
export interface Credentials {
  /** Where the tokens belong: the management API, or an application gateway (`realm` says which routes). */
  readonly url: string;
  readonly realm: string;
  readonly session_id: string;
  readonly access_token: string;
  readonly access_expires_at: string;
  readonly refresh_token: string;
  readonly refresh_expires_at: string;
  /** The device key's public half, to tell which key signed in (null when unknown). */
  readonly public_key: string | null;
  /**
   * The file of the device key that signed in (never the key itself): a session bound to the key
   * (DPoP) signs each refresh with it. Absent in files written before the binding existed.
   */
  readonly key_path?: string;
  /** `DPoP` when the access token is bound to the device key (`:auth/sender-constraint :required`); absent means `Bearer`. */
  readonly token_type?: string;
}

/** One saved sign-in of a credentials file, by name. */
export interface CredentialContext {
  readonly name: string;
  /** Whether it is the file's current context (the one used when none is named). */
  readonly current: boolean;
  readonly credentials: Credentials;
}

/**
 * A credentials file: one context per sign-in (service URL and realm), one of them current.
 * Mode 0600 in a 0700 directory, replaced atomically. A store is bound to a context name, or
 * to none: then it works on the current context (or the only one).
 */
export interface CredentialStore {
  readonly path: string;
  /** The context this store is bound to, or null for the current one. */
  readonly context: string | null;
  /** The credentials of the bound (else current, else only) context, or null when there are none. Throws on a corrupt file. */
  load(): Credentials | null;
  /**
   * Saves the credentials atomically (temporary file, fsync, rename) into the bound context,
   * else the one {@link load} reads, else a new one named by {@link contextNameFor}. The first
   * context saved becomes current; other contexts are kept as they are.
   */
  save(credentials: Credentials): void;
  /** Deletes that context (the file with the last one); false when there was none. */
  remove(): boolean;
  /** Every context of the file, by name. */
  contexts(): CredentialContext[];
  /** Makes `name` the current context; a TypeError when there is none of that name. */
  use(name: string): void;
  /** The same file, bound to the context `name`. */
  select(name: string): CredentialStore;
}

/**
 * The default name of the context a sign-in is saved as: the realm and the service's host
 * (`management@127.0.0.1:9090`, `application@app.example`), so signing in to another
 * service or realm adds a context instead of replacing one.
 *
 * @example
 * contextNameFor({ realm: 'management', url: 'http://127.0.0.1:9090' }); // 'management@127.0.0.1:9090'
 */
export function contextNameFor(credentials: Pick<Credentials, 'realm' | 'url'>): string {
  let host: string;
  try {
    host = new URL(credentials.url).host;
  } catch {
    host = credentials.url;
  }
  return `${credentials.realm}@${host}`;
}

/** How long a save waits for another command's lock, and when a lock counts as abandoned. */
const LOCK_WAIT_MS = 5_000;
const STALE_LOCK_MS = 30_000;
const LOCK_SLEEP = new Int32Array(new SharedArrayBuffer(4));

const CONTEXT_NAME = /^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$/;

/**
 * Whether `name` can name a context: a letter or digit, then letters, digits and `. _ @ : + -`,
 * at most 128 characters.
 *
 * @example
 * isContextName('prod-admin'); // true
 */
export function isContextName(name: string): boolean {
  return CONTEXT_NAME.test(name);
}

/**
 * Where credentials live: `$SVC_CREDENTIALS`, else `~/.config/svc/credentials.json`.
 *
 * @example
 * const path = defaultCredentialsPath(process.env);
 */
export function defaultCredentialsPath(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  const fromEnv = env.SVC_CREDENTIALS;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  return join(home, '.config', 'svc', 'credentials.json');
}

/**
 * Where this device's key lives unless told otherwise: `$SVC_DEVICE_KEY`, else
 * `~/.config/svc/device.pem` (beside the credentials, in the user's own config directory).
 *
 * @example
 * const keyFile = defaultDeviceKeyPath(process.env);
 */
export function defaultDeviceKeyPath(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  const fromEnv = env.SVC_DEVICE_KEY;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  return join(home, '.config', 'svc', 'device.pem');
}

/**
 * The credentials of a token pair just issued by `url`.
 *
 * @example
 * store.save(credentialsFromTokenPair(api.baseUrl, pair, Date.now(), key.publicKeyHex));
 */
export function credentialsFromTokenPair(
  url: string,
  pair: TokenPairJson,
  now: number,
  publicKey: string | null = null,
  keyPath?: string,
): Credentials {
  return {
    url,
    realm: pair.realm,
    session_id: pair.session_id,
    access_token: pair.access_token,
    access_expires_at: new Date(now + pair.expires_in * 1000).toISOString(),
    refresh_token: pair.refresh_token,
    refresh_expires_at: new Date(now + pair.refresh_expires_in * 1000).toISOString(),
    public_key: publicKey,
    ...(keyPath === undefined ? {} : { key_path: keyPath }),
    ...(pair.token_type === 'DPoP' ? { token_type: 'DPoP' } : {}),
  };
}

const STRING_FIELDS = [
  'url',
  'realm',
  'session_id',
  'access_token',
  'access_expires_at',
  'refresh_token',
  'refresh_expires_at',
] as const satisfies readonly (keyof Credentials)[];

/** What the file holds: version 2, contexts by name and the current one. */
interface CredentialsFile {
  current: string | null;
  contexts: Record<string, Credentials>;
}

function credentialsOf(value: unknown, path: string, where: string): Credentials {
  const v = value as Record<string, unknown>;
  if (typeof value !== 'object' || value === null || STRING_FIELDS.some((k) => typeof v[k] !== 'string')) {
    throw new TypeError(`${path} is not a credentials file (${where}); delete it and run \`svc auth login\` again`);
  }
  return {
    url: v.url as string,
    realm: v.realm as string,
    session_id: v.session_id as string,
    access_token: v.access_token as string,
    access_expires_at: v.access_expires_at as string,
    refresh_token: v.refresh_token as string,
    refresh_expires_at: v.refresh_expires_at as string,
    public_key: typeof v.public_key === 'string' ? v.public_key : null,
    ...(typeof v.key_path === 'string' && v.key_path !== '' ? { key_path: v.key_path } : {}),
    ...(v.token_type === 'DPoP' ? { token_type: 'DPoP' } : {}),
  };
}

/**
 * Reads either form: version 2 (`{"version":2,"current","contexts"}`), or the single sign-in
 * that files held before contexts, which becomes the one, current context (saved as version 2
 * at the next save, nothing lost).
 */
function parseFile(text: string, path: string): CredentialsFile {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new TypeError(`${path} is not valid JSON; delete it and run \`svc auth login\` again`);
  }
  const v = value as Record<string, unknown>;
  if (typeof value === 'object' && value !== null && v.version === 2) {
    const contexts: Record<string, Credentials> = Object.create(null);
    if (typeof v.contexts !== 'object' || v.contexts === null || Array.isArray(v.contexts)) {
      throw new TypeError(`${path} is not a credentials file (no contexts); delete it and run \`svc auth login\` again`);
    }
    for (const [name, creds] of Object.entries(v.contexts as Record<string, unknown>)) {
      if (!isContextName(name)) throw new TypeError(`${path} is not a credentials file (context name ${JSON.stringify(name)})`);
      contexts[name] = credentialsOf(creds, path, `context ${name}`);
    }
    const current = typeof v.current === 'string' && v.current in contexts ? v.current : null;
    return { current, contexts };
  }
  const legacy = credentialsOf(value, path, 'neither a sign-in nor contexts');
  const name = contextNameFor(legacy);
  return { current: name, contexts: Object.assign(Object.create(null), { [name]: legacy }) };
}

/** The context a store not bound to one works on: the current one, else the only one. */
function defaultContext(file: CredentialsFile): string | null {
  if (file.current !== null) return file.current;
  const names = Object.keys(file.contexts);
  return names.length === 1 ? (names[0] as string) : null;
}

function ensureOwnerOnlyDir(dir: string): void {
  let exists = true;
  try {
    statSync(dir);
  } catch {
    exists = false;
  }
  if (!exists) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // mkdir's mode is filtered by the umask: set it explicitly.
    chmodSync(dir, 0o700);
  }
}

/**
 * A credentials file at `path`, bound to the context `options.context`, else working on the
 * current one.
 *
 * @example
 * const store = createCredentialStore(defaultCredentialsPath());
 * const creds = store.load();
 * const app = createCredentialStore(defaultCredentialsPath(), { context: 'application@app.example' });
 */
export function createCredentialStore(path: string, options: { readonly context?: string | null } = {}): CredentialStore {
  const bound = options.context ?? null;
  if (bound !== null && !isContextName(bound)) {
    throw new TypeError(
      `${JSON.stringify(bound)} is not a context name (letters, digits and . _ @ : + -, starting with a letter or digit)`,
    );
  }
  function read(): CredentialsFile {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { current: null, contexts: Object.create(null) };
      throw error;
    }
    return parseFile(text, path);
  }
  function write(file: CredentialsFile): void {
    const dir = dirname(path);
    ensureOwnerOnlyDir(dir);
    const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
    const fd = openSync(tmp, 'wx', 0o600);
    try {
      writeSync(fd, `${JSON.stringify({ version: 2, current: file.current, contexts: file.contexts }, null, 2)}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    try {
      chmodSync(tmp, 0o600);
      renameSync(tmp, path);
    } catch (error) {
      rmSync(tmp, { force: true });
      throw error;
    }
  }
  /**
   * Runs a read-modify-write of the file under `<path>.lock` (created exclusively), so two
   * commands saving different contexts at once do not lose one of the writes: a lost write
   * would bring back a used refresh token, whose reuse revokes the session. A lock left by a
   * crashed process is taken over after {@link STALE_LOCK_MS}.
   */
  function locked<T>(fn: () => T): T {
    const lock = `${path}.lock`;
    ensureOwnerOnlyDir(dirname(path));
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        closeSync(openSync(lock, 'wx', 0o600));
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
        if (age > STALE_LOCK_MS) rmSync(lock, { force: true });
        else if (Date.now() > deadline) throw new TypeError(`${path} is locked by another svc command (${lock}); try again`);
        else Atomics.wait(LOCK_SLEEP, 0, 0, 10);
      }
    }
    try {
      return fn();
    } finally {
      rmSync(lock, { force: true });
    }
  }
  return Object.freeze({
    path,
    context: bound,
    load(): Credentials | null {
      const file = read();
      const name = bound ?? defaultContext(file);
      return name === null ? null : (file.contexts[name] ?? null);
    },
    save(credentials: Credentials): void {
      locked(() => {
        const file = read();
        const name = bound ?? defaultContext(file) ?? contextNameFor(credentials);
        file.contexts[name] = credentials;
        if (file.current === null) file.current = name;
        write(file);
      });
    },
    remove(): boolean {
      return locked(() => {
        const file = read();
        const name = bound ?? defaultContext(file);
        if (name === null || !(name in file.contexts)) return false;
        delete file.contexts[name];
        if (file.current === name) file.current = null;
        if (Object.keys(file.contexts).length > 0) {
          write(file);
          return true;
        }
        try {
          rmSync(path);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
        return true;
      });
    },
    contexts(): CredentialContext[] {
      const file = read();
      const current = defaultContext(file);
      return Object.entries(file.contexts)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([name, credentials]) => ({ name, current: name === current, credentials }));
    },
    use(name: string): void {
      locked(() => {
        const file = read();
        if (!(name in file.contexts)) {
          throw new TypeError(`no context ${JSON.stringify(name)} in ${path}; \`svc auth contexts\` lists them`);
        }
        file.current = name;
        write(file);
      });
    },
    select(name: string): CredentialStore {
      return createCredentialStore(path, { context: name });
    },
  });
}
