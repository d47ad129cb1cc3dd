import { randomBytes, randomFillSync } from 'node:crypto';
import type { RandomBytes } from '@svc/core';

/**
 * CSPRNG bytes served from a pool refilled by `randomFillSync`: one system call per 64 KiB
 * instead of one per token (each `randomBytes` call costs microseconds on virtual machines,
 * and a sign-in draws several times). Every byte is handed out once, copied into a buffer the
 * caller owns, and wiped from the pool.
 *
 * @example
 * const random = createRandomPool();
 * mintToken('access', random);
 */
export function createRandomPool(size = 64 * 1024): RandomBytes {
  const pool = Buffer.allocUnsafeSlow(size);
  let offset = size;
  return (n: number) => {
    if (n > size / 4) return randomBytes(n);
    if (offset + n > size) {
      randomFillSync(pool);
      offset = 0;
    }
    const out = Buffer.from(pool.subarray(offset, offset + n));
    pool.fill(0, offset, offset + n);
    offset += n;
    return out;
  };
}
