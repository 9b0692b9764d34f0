/**
 * The engine as layers (src/limiter/layer.ts): one written order that every entry point follows,
 * the same refusals on every entry point, and a reset that every layer hears. Through the public
 * limiter, on the memory store and on a store that is not the memory store (so the guard is in the
 * stack): a Store of our own that keeps its state in a memory store.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, createLimiter, memoryStore, type Decision, type Policy, type Store } from '../../src/index.js';
import type { CoreLimiter } from '../../src/limiter/core.js';
import { LAYER_ORDER } from '../../src/limiter/layer.js';

/** A store that answers like the memory store but is not one: the limiter guards its calls. */
function foreignStore(): Store & { calls: number } {
  const inner = memoryStore({ sweepIntervalMs: 0 });
  const store = {
    name: 'foreign',
    calls: 0,
    consume: (...args: Parameters<Store['consume']>) => (store.calls++, inner.consume(...args)),
    peek: (...args: Parameters<Store['peek']>) => (store.calls++, inner.peek(...args)),
    consumeAll: (...args: Parameters<Store['consumeAll']>) => (store.calls++, inner.consumeAll(...args)),
    addToWindow: (...args: Parameters<NonNullable<Store['addToWindow']>>) => (store.calls++, inner.addToWindow(...args)),
    reset: (...args: Parameters<Store['reset']>) => inner.reset(...args),
    resetPrefix: (prefix: string) => inner.resetPrefix(prefix),
    close: () => inner.close(),
  };
  return store;
}

const window: Policy = { algorithm: 'fixed-window', limit: 20, window: '1m' };
const T0 = 1_700_000_040_000;

describe('the engine as layers', () => {
  it('stacks the layers that are on in the one written order', () => {
    const full = createLimiter({ store: foreignStore(), overLimitCache: true }) as unknown as CoreLimiter;
    expect(full.layerNames()).toEqual([...LAYER_ORDER]);
    const memory = createLimiter({ store: memoryStore() }) as unknown as CoreLimiter;
    expect(memory.layerNames()).toEqual(['lease', 'local-first', 'store']);
  });

  it('decides a limit alone and a group of that one limit alike: the same answers and store calls, with a lease and the over-limit cache', async () => {
    const run = async (asGroup: boolean): Promise<{ decisions: Decision[]; calls: number; hits: number | undefined }> => {
      const store = foreignStore();
      const limiter = createLimiter({ store, overLimitCache: true });
      const decisions: Decision[] = [];
      for (let i = 0; i < 30; i++) {
        const now = T0 + i * 10;
        decisions.push(asGroup ? (await limiter.limitAll([{ key: 'k', policy: window, lease: 4 }], { now }))[0]! : await limiter.limit('k', window, { lease: 4, now }));
      }
      return { decisions, calls: store.calls, hits: limiter.overLimitCacheStats()?.hits };
    };
    const alone = await run(false);
    const group = await run(true);
    expect(group).toEqual(alone);
    expect(alone.decisions.filter((decision) => decision.allowed)).toHaveLength(20);
    // 20 admitted in leases of 4 (5 store calls), then denied: the first denial reaches the store,
    // the later ones come from the cache.
    expect(alone.calls).toBeLessThan(10);
    expect(alone.hits).toBeGreaterThan(0);
  });

  it('answers a denied key from the cache before its lease, counting one hit per answer', async () => {
    const store = foreignStore();
    const limiter = createLimiter({ store, overLimitCache: true });
    for (let i = 0; i < 20; i++) expect((await limiter.limit('k', window, { lease: 4, now: T0 + i })).allowed).toBe(true);
    const first = await limiter.limit('k', window, { lease: 4, now: T0 + 20 });
    expect(first.allowed).toBe(false);
    expect(limiter.overLimitCacheStats()!.hits).toBe(0);
    const calls = store.calls;
    for (let i = 1; i <= 3; i++) {
      expect(await limiter.limit('k', window, { lease: 4, now: T0 + 20 + i })).toEqual({ ...first, retryAfter: first.retryAfter - i, now: first.now + i });
      expect(limiter.overLimitCacheStats()!.hits).toBe(i);
    }
    expect(store.calls).toBe(calls);
  });

  it('refuses a lease with local-first on every entry point, with the same words', async () => {
    const limiter = createLimiter({ store: memoryStore() });
    const both = { lease: 5, syncIntervalMs: 100 };
    const single = await limiter.limit('k', window, both).catch((error: unknown) => error);
    const group = await limiter.limitAll([{ key: 'k', policy: window, ...both }]).catch((error: unknown) => error);
    expect(single).toBeInstanceOf(InvalidOptionError);
    expect(group).toBeInstanceOf(InvalidOptionError);
    expect((single as Error).message).toMatch(/^give lease or syncIntervalMs \(local-first\), not both/);
    expect((group as Error).message).toBe(`limitAll: ${(single as Error).message}`);
    expect(() => limiter.limitSync('k', window, both)).toThrow(InvalidOptionError);
  });

  it('a reset reaches every layer: the lease, the cached denial and the store forget the key', async () => {
    const store = foreignStore();
    const limiter = createLimiter({ store, overLimitCache: true });
    for (let i = 0; i < 25; i++) await limiter.limit('k', window, { lease: 4, now: T0 + i });
    expect((await limiter.limit('k', window, { lease: 4, now: T0 + 30 })).allowed).toBe(false);
    await limiter.reset('k', window);
    const after = await limiter.limit('k', window, { lease: 4, now: T0 + 31 });
    // A new lease of 4 taken from an empty counter: 19 left for everyone, 3 of them held here.
    expect(after).toMatchObject({ allowed: true, remaining: 19 });
    expect(limiter.overLimitCacheStats()!.keys).toBe(0);
  });

  it('a prefix reset reaches every layer too', async () => {
    const limiter = createLimiter({ store: foreignStore(), overLimitCache: true });
    for (let i = 0; i < 25; i++) await limiter.limit('user:1', window, { lease: 4, now: T0 + i });
    expect(await limiter.resetPrefix('user:')).toBeGreaterThan(0);
    expect(await limiter.limit('user:1', window, { lease: 4, now: T0 + 40 })).toMatchObject({ allowed: true, remaining: 19 });
  });
});
