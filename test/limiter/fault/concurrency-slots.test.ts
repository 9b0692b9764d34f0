/**
 * Concurrency slots when the store cannot answer (a Redis that was never there): the failure
 * modes answer an acquire as they answer a decision, and a release never hangs or throws but
 * under `throw`.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, redisStore, StoreUnavailableError, type RedisStore } from '../../../src/index.js';
import { freePort } from '../../support/redis.js';

const stores: RedisStore[] = [];

async function deadStore(): Promise<RedisStore> {
  const store = redisStore({ url: `redis://127.0.0.1:${await freePort()}`, connectTimeoutMs: 100 });
  stores.push(store);
  await store.ready().catch(() => undefined);
  return store;
}

describe('concurrency slots under the failure modes', () => {
  it('local holds ⌈limit / expectedNodes⌉ slots in this process, and frees them there', async () => {
    const limiter = createLimiter({ store: await deadStore(), expectedNodes: 2, heartbeatMs: false });
    const permits = [];
    for (let i = 0; i < 3; i++) permits.push(await limiter.acquire('k', { limit: 4, ttl: '1m' }));
    expect(permits.map((p) => [p.allowed, p.held, p.reason])).toEqual([
      [true, 1, 'local-fallback'],
      [true, 2, 'local-fallback'],
      [false, 2, 'local-fallback'],
    ]);
    expect(await permits[0]!.release()).toBe(true);
    expect(await permits[0]!.release()).toBe(false);
    expect((await limiter.acquire('k', { limit: 4, ttl: '1m' })).allowed).toBe(true);
    await limiter.close();
  });

  it('open grants unchecked, closed refuses for a second, throw rejects with the store error', async () => {
    const store = await deadStore();
    const open = await createLimiter({ store, failureMode: 'open', heartbeatMs: false }).acquire('k', { limit: 1, ttl: '1s' });
    expect([open.allowed, open.held, open.reason]).toEqual([true, 0, 'fail-open']);
    expect(await open.release()).toBe(false);
    const limiter = createLimiter({ store, failureMode: 'closed', heartbeatMs: false });
    const closed = await limiter.acquire('k', { limit: 1, ttl: '1s' });
    expect([closed.allowed, closed.retryAfter, closed.reason]).toEqual([false, 1_000, 'fail-closed']);
    await expect(limiter.acquire('k', { limit: 1, ttl: '1s', failureMode: 'throw' })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(limiter.release('k', 'some-id', { failureMode: 'throw' })).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await limiter.release('k', 'some-id')).toBe(false);
    await Promise.all(stores.map((s) => s.close()));
  });
});
