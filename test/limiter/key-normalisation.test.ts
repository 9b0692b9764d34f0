/**
 * One key, one counter, in every store: a key with a lone surrogate (half of a UTF-16 pair) is
 * counted as the key with U+FFFD in its place, as Redis has always counted it (it receives UTF-8,
 * where a lone surrogate becomes U+FFFD), and now the memory store too. Well-formed keys, astral
 * characters included, are never folded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, redisStore, type Limiter, type Policy, type Store } from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';

const ONE_PER_HOUR: Policy = { algorithm: 'token-bucket', limit: 1, window: '1h' };

const redis = useRedisServer();

describe.each([
  ['memory', async (): Promise<Store> => memoryStore()],
  [
    'redis',
    async (): Promise<Store> => {
      const store = redisStore({ url: redis.url });
      await store.ready();
      return store;
    },
  ],
])('keys with lone surrogates on the %s store', (_name, makeStore) => {
  let limiter: Limiter;
  beforeAll(async () => {
    limiter = createLimiter({ store: await makeStore() });
  });
  afterAll(async () => {
    await limiter.close();
  });
  const allowed = async (key: string): Promise<boolean> => (await limiter.limit(key, ONE_PER_HOUR)).allowed;

  it('two different lone surrogates in the same place are one counter: the key with U+FFFD', async () => {
    expect(await allowed('a:\uD800a')).toBe(true);
    expect(await allowed('a:\uDBFFa')).toBe(false);
    expect(await allowed('a:\uDC00a')).toBe(false);
    expect(await allowed('a:\uFFFDa')).toBe(false);
    expect((await limiter.peek('a:\uDFFFa', ONE_PER_HOUR)).allowed).toBe(false);
    await limiter.reset('a:\uDABCa', ONE_PER_HOUR);
    expect(await allowed('a:\uD800a')).toBe(true);
  });

  it('a pair in the wrong order is two lone surrogates; one at the end is one', async () => {
    expect(await allowed('b:\uDE00\uD83D')).toBe(true);
    expect(await allowed('b:\uFFFD\uFFFD')).toBe(false);
    expect(await allowed('c:x\uD83D')).toBe(true);
    expect(await allowed('c:x\uFFFD')).toBe(false);
  });

  it('well-formed astral characters are not folded: each is its own counter', async () => {
    expect(await allowed('d:\u{1F600}a')).toBe(true);
    expect(await allowed('d:\u{1F601}a')).toBe(true);
    expect(await allowed('d:\uFFFDa')).toBe(true);
    expect(await allowed('d:\u{1F600}a')).toBe(false);
  });

  it('limitAll counts them together too', async () => {
    const [first] = await limiter.limitAll([{ key: 'e:\uD800', policy: ONE_PER_HOUR }]);
    expect(first!.allowed).toBe(true);
    const [second] = await limiter.limitAll([{ key: 'e:\uDBFF', policy: ONE_PER_HOUR }]);
    expect(second!.allowed).toBe(false);
  });
});
