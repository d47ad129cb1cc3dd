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

/** A file of {@link Credentials}: mode 0600 in a 0700 directory, replaced atomically. */
export interface CredentialStore {
  readonly path: string;
  /** The saved credentials, or null when there are none. Throws on a corrupt file. */
  load(): Credentials | null;
  /** Writes the credentials atomically (temporary file, fsync, rename). */
  save(credentials: Credentials): void;
  /** Deletes the file; false when there was none. */
  remove(): boolean;
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

function parseCredentials(text: string, path: string): Credentials {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new TypeError(`${path} is not valid JSON; delete it and run \`svc auth login\` again`);
  }
  const v = value as Record<string, unknown>;
  if (typeof value !== 'object' || value === null || STRING_FIELDS.some((k) => typeof v[k] !== 'string')) {
    throw new TypeError(`${path} is not a credentials file; delete it and run \`svc auth login\` again`);
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
 * A credentials file at `path`.
 *
 * @example
 * const store = createCredentialStore(defaultCredentialsPath());
 * const creds = store.load();
 */
export function createCredentialStore(path: string): CredentialStore {
  return Object.freeze({
    path,
    load(): Credentials | null {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
      return parseCredentials(text, path);
    },
    save(credentials: Credentials): void {
      const dir = dirname(path);
      ensureOwnerOnlyDir(dir);
      const tmp = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
      const fd = openSync(tmp, 'wx', 0o600);
      try {
        writeSync(fd, `${JSON.stringify(credentials, null, 2)}\n`);
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
    },
    remove(): boolean {
      try {
        rmSync(path);
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw error;
      }
    },
  });
}
