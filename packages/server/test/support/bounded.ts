/**
 * Resolves with `promise`, or rejects once `ms` have passed, naming what was waited for. Every
 * wait of the connection tests goes through it: none can hang the run.
 *
 * @example
 * const r = await within(rawText(port, request), 10_000, 'the answer to a half-closed GET');
 */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Polls `check` every 50 ms until it returns true, or rejects after `ms` with `what` and the
 * last value `describe` gives.
 *
 * @example
 * await until(async () => (await openConnections(server)) === 0, 10_000, 'the server to free every slot');
 */
export async function until(check: () => boolean | Promise<boolean>, ms: number, what: string, describe?: () => unknown): Promise<void> {
  const started = performance.now();
  for (;;) {
    if (await check()) return;
    if (performance.now() - started > ms) {
      throw new Error(`waited ${ms} ms for ${what}${describe === undefined ? '' : ` (last: ${JSON.stringify(await describe())})`}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
