import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { SuiteContext } from '../harness.js';

/** ping, close, getProject, initProject. */
export function projectSuite(ctx: SuiteContext): void {
  describe('project and lifecycle', () => {
    test('ping resolves on an open store', () =>
      ctx.world(async ({ store }) => {
        await store.ping();
      }));

    test('a fresh store has no project until initProject records one', () =>
      ctx.world(async ({ store, clock }) => {
        assert.equal(await store.getProject(), null);
        assert.deepEqual(await store.initProject({ projectId: 'prj_01KAQ00000000000000000000A', createdAt: clock.now() }), {
          projectId: 'prj_01KAQ00000000000000000000A',
        });
        assert.deepEqual(await store.getProject(), { projectId: 'prj_01KAQ00000000000000000000A', createdAt: clock.now() });
      }));

    test('initProject records the project id once: a later id is ignored and the first returned', () =>
      ctx.world(async ({ store, clock }) => {
        await store.initProject({ projectId: 'prj_01KAQ00000000000000000000A', createdAt: clock.now() });
        clock.advance(1000);
        const again = await store.initProject({ projectId: 'prj_01KAQ00000000000000000000B', createdAt: clock.now() });
        assert.equal(again.projectId, 'prj_01KAQ00000000000000000000A');
        assert.equal((await store.getProject())?.createdAt, clock.now() - 1000);
      }));

    test('close releases the store: it no longer answers', async () => {
      const store = await ctx.factory.open();
      await store.ping();
      await (ctx.factory.close ? ctx.factory.close(store) : store.close());
      await assert.rejects(store.ping());
    });
  });
}
