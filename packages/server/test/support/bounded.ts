/**
 * Waits for `promise` at most `ms` milliseconds: past that, rejects with an error naming `what`
 * was waited for, so a test that would hang fails instead, and says on what.
 *
 * @example
 * const r = await within(10_000, 'the refusal of the upgrade', rawText(port, request));
 */
export function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}
