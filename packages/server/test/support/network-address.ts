import { execFileSync } from 'node:child_process';
import { networkAddress } from '../real/hardening/surfaces.js';

/** A non-loopback IPv4 address of this machine the tests may bind and connect to, or why there is none. */
export type TestNetworkAddress =
  | { readonly address: string; readonly skip: false }
  | { readonly address: undefined; readonly skip: string };

function ip(args: readonly string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * A non-loopback IPv4 address of this machine for the network-attack tests: one it already
 * has; else, when root, one made for the run on a dummy interface of its own
 * (`svct<pid>`, a dummy or else a port-less bridge, `10.254.x.y/32`: only this machine's traffic; a leftover
 * of the same name is replaced, and it is removed when the process exits or is stopped by SIGINT or SIGTERM);
 * else a reason to skip, or, under CI (`process.env.CI` set), an error: a skipped attack test
 * there would pass the build without testing anything.
 *
 * @example
 * const NET = testNetworkAddress();
 * describe('over the network', { skip: NET.skip }, () => { ... NET.address ... });
 */
export function testNetworkAddress(): TestNetworkAddress {
  const have = networkAddress();
  if (have !== undefined) return { address: have, skip: false };
  const why = (reason: string): TestNetworkAddress => {
    if (process.env.CI !== undefined && process.env.CI !== '') {
      throw new Error(
        `the network-attack tests need a non-loopback IPv4 address and none could be made (${reason}); run them as root or give the machine one`,
      );
    }
    return { address: undefined, skip: `this machine has no non-loopback IPv4 address (${reason})` };
  };
  if (process.getuid?.() !== 0) return why('not root, so no dummy interface can be made');
  const name = `svct${process.pid % 100_000}`;
  const address = `10.254.${(process.pid >> 8) & 255}.${((process.pid & 255) % 254) + 1}`;
  try {
    return { address: addDummyAddress(name, address), skip: false };
  } catch (error) {
    return why((error as Error).message);
  }
}

/**
 * Puts `address` (IPv4, as a /32) on a new interface `name` of this machine (needs root): a
 * dummy interface where the kernel has the module, else a bridge without ports (containers
 * often lack the dummy module); either only ever carries this machine's own traffic. A leftover
 * interface of the same name is removed first; the new one is removed when the process exits or
 * is stopped by SIGINT or SIGTERM.
 *
 * @throws {Error} naming what failed.
 * @example
 * addDummyAddress('svct123', '10.254.0.123'); // "10.254.0.123"
 */
export function addDummyAddress(name: string, address: string): string {
  // Idempotent: an interface of this name left by an earlier run that was killed (SIGKILL, a
  // power cut) is removed first; the name is this test run's own.
  try {
    ip(['link', 'del', name]);
  } catch {
    // None left over.
  }
  const failures: string[] = [];
  for (const type of ['dummy', 'bridge']) {
    try {
      ip(['link', 'add', name, 'type', type]);
      failures.length = 0;
      break;
    } catch (error) {
      failures.push(`ip link add ${name} type ${type}: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}`);
    }
  }
  if (failures.length > 0) throw new Error(failures.join('; '));
  const remove = () => {
    try {
      ip(['link', 'del', name]);
    } catch {
      // Already gone: nothing to clean up.
    }
  };
  process.once('exit', remove);
  // A run stopped by Ctrl-C or a runner's SIGTERM does not reach 'exit': remove the interface,
  // then end by the same signal as the process would have (unless someone else handles it).
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      remove();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
  try {
    ip(['addr', 'add', `${address}/32`, 'dev', name]);
    ip(['link', 'set', name, 'up']);
  } catch (error) {
    ip(['link', 'del', name]);
    throw new Error(`configuring ${name} failed: ${String((error as { stderr?: unknown }).stderr ?? error).trim()}`);
  }
  return address;
}
