import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AuthError } from '../src/errors.js';
import { classifyStoreErrors, StoreUnavailableError, storeFaultOf } from '../src/store-fault.js';

// A store's operations as a store class has them: async methods, one that throws before it
// returns a promise, one that returns a plain value; `this` is the store.
class FakeStore {
  readonly name = 'fake';
  async reads(): Promise<string> {
    return this.name;
  }
  async fails(err: unknown): Promise<never> {
    throw err;
  }
  throwsAtOnce(err: unknown): Promise<never> {
    throw err;
  }
  plain(): string {
    return 'plain';
  }
}

const OUTAGE = new Error('SQLITE_BUSY: database is locked');
const classify = (err: unknown) => (err === OUTAGE ? 'locked' : null);

function wrapped(classifier: (err: unknown) => 'locked' | null = classify): FakeStore {
  class Store extends FakeStore {}
  classifyStoreErrors(Store.prototype, ['reads', 'fails', 'throwsAtOnce', 'plain'], classifier);
  return new Store();
}

describe('classifyStoreErrors: what a wrapped store operation answers', () => {
  test('a value, with the store as `this`; a plain value as a resolved promise', async () => {
    const store = wrapped();
    assert.equal(await store.reads(), 'fake');
    const plain = store.plain() as unknown;
    assert.ok(plain instanceof Promise, 'every wrapped operation answers a promise');
    assert.equal(await plain, 'plain');
  });

  test('an outage becomes 503 store_unavailable with its cause; anything else is rethrown as it is', async () => {
    const store = wrapped();
    const outage = await store.fails(OUTAGE).catch((e: unknown) => e);
    assert.ok(outage instanceof StoreUnavailableError);
    assert.equal((outage as AuthError).code, 'store_unavailable');
    assert.equal((outage as AuthError).status, 503);
    assert.equal(storeFaultOf(outage), 'locked');
    assert.equal((outage as Error).cause, OUTAGE);
    const other = new TypeError('a bug');
    assert.equal(await store.fails(other).catch((e: unknown) => e), other);
    const refusal = new AuthError('invalid_token', 'no');
    assert.equal(await store.fails(refusal).catch((e: unknown) => e), refusal);
  });

  test('an operation that throws before it returns a promise is a rejection, classified the same way', async () => {
    const store = wrapped();
    const answer = store.throwsAtOnce(OUTAGE);
    assert.ok(answer instanceof Promise, 'no synchronous throw');
    assert.ok((await answer.catch((e: unknown) => e)) instanceof StoreUnavailableError);
  });

  test('a classifier that throws is a rejection too, never a synchronous throw out of the store', async () => {
    const store = wrapped((err) => (err as { code: string }).code as never);
    for (const call of [() => store.throwsAtOnce(undefined), () => store.fails(undefined)]) {
      let answer: Promise<unknown> | undefined;
      assert.doesNotThrow(() => {
        answer = call();
      });
      assert.ok((await answer?.catch((e: unknown) => e)) instanceof TypeError);
    }
  });
});
