import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { isIPv4 } from 'node:net';
import { endianness } from 'node:os';
import { clientAddressKey } from './failure-limiter.js';

const owners = new WeakMap<Socket, Promise<number | null>>();

/**
 * The local account (uid) whose socket is the peer of `socket`, a TCP connection over loopback,
 * as the kernel records it (`/proc/net/tcp`, `/proc/net/tcp6`): a fact the caller cannot forge.
 * Null off Linux, or when the peer's socket is not found (it is gone). Looked up once per
 * connection.
 *
 * @example
 * await loopbackPeerUid(req.socket); // 1000
 */
export function loopbackPeerUid(socket: Socket): Promise<number | null> {
  let owner = owners.get(socket);
  if (owner === undefined) {
    owner = lookUpPeerUid(socket).catch(() => null);
    owners.set(socket, owner);
  }
  return owner;
}

/**
 * The budget unit of a client: its address unit (see `clientAddressKey`), and on loopback, where
 * every local account shares one address, the local account it connects from
 * (`addr:loopback|uid:1000`), so one account's flood cannot spend another's budget. A loopback
 * peer whose account cannot be told (off Linux; behind a proxy on the same host; a socket gone)
 * counts as `addr:loopback`, a unit of its own.
 *
 * @example
 * await sourceKey(req.ip, req.socket); // "addr:loopback|uid:1000"
 */
export async function sourceKey(ip: string, socket: Socket): Promise<string> {
  const unit = clientAddressKey(ip);
  // Only a direct peer: behind a trusted proxy `ip` is not the socket's peer.
  if (unit !== 'addr:loopback' || socket.remoteAddress !== ip) return unit;
  const uid = await loopbackPeerUid(socket);
  return uid === null ? unit : `${unit}|uid:${uid}`;
}

async function lookUpPeerUid(socket: Socket): Promise<number | null> {
  if (process.platform !== 'linux') return null;
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (remoteAddress === undefined || remotePort === undefined || localAddress === undefined || localPort === undefined) return null;
  // On a dual-stack listener an IPv4 peer shows as `::ffff:a.b.c.d`, but its own socket is an
  // IPv4 one, listed in /proc/net/tcp with plain addresses (an IPv6 socket connecting to a mapped
  // address is listed in tcp6): both are looked in.
  const remote4 = unmappedIPv4(remoteAddress);
  const local4 = unmappedIPv4(localAddress);
  const tables: [file: string, peer: string | null, self: string | null][] = [];
  if (isIPv4(remoteAddress)) tables.push(['/proc/net/tcp', procEndpoint(remoteAddress, remotePort), procEndpoint(localAddress, localPort)]);
  else {
    if (remote4 !== null && local4 !== null)
      tables.push(['/proc/net/tcp', procEndpoint(remote4, remotePort), procEndpoint(local4, localPort)]);
    tables.push(['/proc/net/tcp6', procEndpoint(remoteAddress, remotePort), procEndpoint(localAddress, localPort)]);
  }
  for (const [file, peer, self] of tables) {
    if (peer === null || self === null) continue;
    // The peer's own socket: its local end is our remote end, and its remote end is ours.
    const uid = (await socketOwnersReadAfterNow(file)).get(`${peer} ${self}`);
    if (uid !== undefined) return Number.isInteger(uid) ? uid : null;
  }
  return null;
}

/** A /proc/net table's reads: the one under way, and the next one, which has not begun. */
interface TableReads {
  inFlight: Promise<unknown>;
  next: Promise<ReadonlyMap<string, number>> | null;
}

const tableReads = new Map<string, TableReads>();

/**
 * The owners (uid) of the sockets a /proc/net/tcp{,6} table lists, keyed `local remote`, from a
 * read that begins after this call: so it lists every socket that existed when it was made.
 * The kernel writes the whole table on every read (milliseconds of CPU on a busy host, more
 * than a sign-in costs), so the lookups of a burst of new connections share one read: each
 * joins the next read that has not begun yet, which starts once the one under way is done.
 */
function socketOwnersReadAfterNow(file: string): Promise<ReadonlyMap<string, number>> {
  let reads = tableReads.get(file);
  if (reads === undefined) {
    reads = { inFlight: Promise.resolve(), next: null };
    tableReads.set(file, reads);
  }
  if (reads.next !== null) return reads.next;
  const state = reads;
  const next = state.inFlight
    .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
    .then(() => {
      // From here on a caller needs a read that begins after it: the next one.
      state.next = null;
      const read = readFile(file, 'utf8').then(socketOwners);
      state.inFlight = read.catch(() => undefined);
      return read;
    });
  state.next = next;
  return next;
}

/** `local remote` -> uid of every line of a /proc/net/tcp{,6} table. */
function socketOwners(table: string): ReadonlyMap<string, number> {
  const owners = new Map<string, number>();
  for (const line of table.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const key = `${fields[1]} ${fields[2]}`;
    // The first line of a pair wins, as the search line by line did.
    if (fields.length > 7 && !owners.has(key)) owners.set(key, Number(fields[7]));
  }
  return owners;
}

/** The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`), or null. */
function unmappedIPv4(address: string): string | null {
  const m = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  return m === null ? null : (m[1] as string);
}

/** An address and port as /proc/net/tcp{,6} print them: the address in 32-bit words of host byte order, the port big-endian, in upper-case hex. */
function procEndpoint(address: string, port: number): string | null {
  const bytes = addressBytes(address);
  if (bytes === null) return null;
  const words: string[] = [];
  for (let i = 0; i < bytes.length; i += 4) {
    const word = bytes.slice(i, i + 4);
    if (endianness() === 'LE') word.reverse();
    words.push(word.map((b) => b.toString(16).padStart(2, '0')).join(''));
  }
  return `${words.join('')}:${port.toString(16).padStart(4, '0')}`.toUpperCase();
}

function addressBytes(address: string): number[] | null {
  if (isIPv4(address)) return address.split('.').map(Number);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped !== null) return [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...(mapped[1] as string).split('.').map(Number)];
  const [head = '', tail] = address.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, ...new Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) return null;
  return groups.flatMap((g) => {
    const n = Number.parseInt(g, 16);
    return [n >> 8, n & 255];
  });
}
