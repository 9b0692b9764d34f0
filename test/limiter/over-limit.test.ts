/**
 * The local over-limit cache: every answer it gives is the one the store would give (random
 * traffic on every algorithm, cached beside uncached), it saves store calls on a hot denied key
 * (Redis's own INFO commandstats), and it stays out of the way where it must (countRejected,
 * resets, larger costs, a replay going back in time).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { InvalidOptionError, createLimiter, memoryStore, redisStore, type Decision, type Limiter, type Policy, type RedisStore } from '../../src/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService } from '../../src/service/server.js';
import { liveStore, useRedisServer } from '../support/redis-topologies.js';

const ALGORITHM_NAMES = [...ALGORITHMS];

/** One step of a random stream: wait, then limit (or peek) with a cost. */
const step = fc.record({ wait: fc.integer({ min: 0, max: 400 }), cost: fc.integer({ min: 1, max: 3 }), op: fc.constantFrom('limit', 'limit', 'peek', 'group') });

describe('over-limit cache: the same answers as the store', () => {
  it('on random traffic, for every algorithm, cached and uncached limiters agree field for field', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ALGORITHM_NAMES),
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom(1_000, 2_500),
        fc.boolean(),
        fc.array(step, { minLength: 1, maxLength: 60 }),
        async (algorithm, limit, window, soft, steps) => {
          const policy: Policy = { algorithm, limit, window, ...(soft ? { softPercent: 50 } : {}) };
          const plain = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
          const cached = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
          let now = 1_700_000_000_000;
          for (const { wait, cost, op } of steps) {
            now += wait;
            // A group of two limits records on 'k' too: what the cache remembered of it must go.
            const call = (limiter: typeof plain): Promise<Decision | Decision[]> =>
              op === 'peek'
                ? limiter.peek('k', policy, { now, cost })
                : op === 'group'
                  ? limiter.limitAll([{ key: 'k', policy, cost }, { key: 'j', policy }], { now })
                  : limiter.limit('k', policy, { now, cost });
            expect(await call(cached)).toEqual(await call(plain));
          }
          expect(cached.overLimitCacheStats()!.hits).toBeGreaterThanOrEqual(0);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('answers a denied key from the cache until its retry time, then asks the store again', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: true });
    const policy: Policy = { algorithm: 'gcra', limit: 2, window: 1_000 };
    await limiter.limit('k', policy, { now: 0 });
    await limiter.limit('k', policy, { now: 0 });
    const denied = await limiter.limit('k', policy, { now: 0 });
    expect([denied.allowed, denied.retryAfter]).toEqual([false, 500]);
    expect(await limiter.limit('k', policy, { now: 200 })).toEqual({ ...denied, retryAfter: 300, now: 200 });
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 1, keys: 1 });
    expect((await limiter.limit('k', policy, { now: 500 })).allowed).toBe(true);
    expect(limiter.overLimitCacheStats()!.hits).toBe(1);
  });

  it('stays out of the way: countRejected, a larger cost, a reset, a replay going back in time', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), overLimitCache: { maxKeys: 2 } });
    const counting: Policy = { algorithm: 'fixed-window', limit: 1, window: 1_000, countRejected: true };
    await limiter.limit('c', counting, { now: 0 });
    await limiter.limit('c', counting, { now: 1 });
    await limiter.limit('c', counting, { now: 2 });
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 0, keys: 0 });
    const bucket: Policy = { algorithm: 'token-bucket', limit: 4, window: 1_000 };
    await limiter.limit('b', bucket, { now: 0, cost: 4 });
    await limiter.limit('b', bucket, { now: 0, cost: 2 }); // denied with cost 2: not remembered
    await limiter.limit('b', bucket, { now: 0 }); // denied with cost 1, nothing left: remembered
    expect(limiter.overLimitCacheStats()).toMatchObject({ keys: 1 });
    await limiter.limit('b', bucket, { now: 100, cost: 2 }); // another cost: the store answers
    expect(limiter.overLimitCacheStats()).toMatchObject({ hits: 0 });
    await limiter.reset('b', bucket);
    expect((await limiter.limit('b', bucket, { now: 100 })).allowed).toBe(true);
    await limiter.limit('b', bucket, { now: 100, cost: 3 });
    await limiter.limit('b', bucket, { now: 100 });
    const hits = limiter.overLimitCacheStats()!.hits;
    await limiter.limit('b', bucket, { now: 50 }); // before the denial: the store decides, not the cache
    expect(limiter.overLimitCacheStats()!.hits).toBe(hits);
    expect(() => createLimiter({ overLimitCache: { maxKeys: 0 } })).toThrow(InvalidOptionError);
    expect(() => createLimiter({ overLimitCache: { size: 5 } as never })).toThrow(/unknown/);
  });
});

describe('over-limit cache on Redis', () => {
  const redis = useRedisServer();
  const { stores } = redis;

  const scriptCalls = (): number => Number(/cmdstat_evalsha:calls=(\d+)/.exec(redis.cli('INFO', 'commandstats'))?.[1] ?? 0);

  it('a hot denied key costs Redis ≥ 10× fewer script calls, with every answer equal to the uncached one', async () => {
    const open = async (): Promise<RedisStore> => {
      const store = redisStore({ url: redis.url, keyPrefix: `olc${stores.length}:` });
      stores.push(store);
      await store.ready();
      return store;
    };
    const plain = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const cached = createLimiter({ store: await open(), deadlineMs: 5_000, overLimitCache: true });
    const policy: Policy = { algorithm: 'sliding-window', limit: 10, window: '1m' };
    const calls = async (limiter: typeof plain): Promise<{ decisions: Decision[]; scripts: number }> => {
      redis.cli('CONFIG', 'RESETSTAT');
      const decisions: Decision[] = [];
      for (let i = 0; i < 1_000; i++) decisions.push(await limiter.limit('attacker', policy, { now: 1_700_000_000_000 + i * 10 }));
      return { decisions, scripts: scriptCalls() };
    };
    const uncached = await calls(plain);
    const withCache = await calls(cached);
    console.log(`[over-limit cache] 1000 checks of a hot key (limit 10/min): EVALSHA ${uncached.scripts} uncached, ${withCache.scripts} cached; cache hits ${cached.overLimitCacheStats()!.hits}`);
    expect(withCache.decisions).toEqual(uncached.decisions);
    expect(withCache.decisions.filter((d) => d.allowed)).toHaveLength(10);
    expect(uncached.scripts).toBeGreaterThanOrEqual(1_000);
    expect(withCache.scripts * 10).toBeLessThanOrEqual(uncached.scripts);
  });

  describe('across nodes', () => {
    /** A node: a limiter on its own connection to the file's Redis, the cache on or off. */
    const node = async (overLimitCache: boolean): Promise<Limiter> => createLimiter({ store: await liveStore(redis), deadlineMs: 5_000, overLimitCache });
    const T0 = 1_700_000_000_000;

    it('a cached denial is the store\'s answer too, whatever another node spends meanwhile: never sooner, for every algorithm', async () => {
      const [a, b, store] = [await node(true), await node(true), await node(false)];
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...ALGORITHM_NAMES),
          fc.integer({ min: 1, max: 3 }),
          fc.array(fc.record({ onA: fc.boolean(), wait: fc.integer({ min: 0, max: 80 }), cost: fc.integer({ min: 1, max: 2 }) }), { minLength: 1, maxLength: 40 }),
          async (algorithm, limit, steps) => {
            const policy: Policy = { algorithm, limit, window: 1_000 };
            const key = `nodes-${run++}`;
            let now = T0;
            for (const { onA, wait, cost } of steps) {
              now += wait;
              const limiter = onA ? a : b;
              const hits = limiter.overLimitCacheStats()!.hits;
              const answer = await limiter.limit(key, policy, { now, cost });
              if (limiter.overLimitCacheStats()!.hits === hits) continue;
              // Answered by the cache: the store, asked now, denies too, and admits no sooner.
              const truth = await store.peek(key, policy, { now, cost });
              expect(truth.allowed).toBe(false);
              expect(truth.retryAfter).toBeGreaterThanOrEqual(answer.retryAfter);
            }
          },
        ),
        { numRuns: 60 },
      );
      const hits = a.overLimitCacheStats()!.hits + b.overLimitCacheStats()!.hits;
      console.log(`[over-limit cache] two nodes, 60 random schedules: ${hits} answers from the cache, each one the store's too`);
      expect(hits).toBeGreaterThan(25);
    });

    it('another node\'s reset is seen at once by that node, and by this one at the key\'s retry instant at the latest', async () => {
      const [a, b, store] = [await node(true), await node(true), await node(false)];
      const policy: Policy = { algorithm: 'gcra', limit: 2, window: 1_000 };
      const key = 'reset-elsewhere';
      for (let i = 0; i < 2; i++) await a.limit(key, policy, { now: T0 });
      expect(await a.limit(key, policy, { now: T0 })).toMatchObject({ allowed: false, retryAfter: 500 });
      expect(await b.limit(key, policy, { now: T0 + 100 })).toMatchObject({ allowed: false, retryAfter: 400 });
      await b.reset(key, policy);
      expect((await b.limit(key, policy, { now: T0 + 100 })).allowed).toBe(true);
      // Node a still answers its remembered denial, where the store would admit…
      expect(await a.limit(key, policy, { now: T0 + 200 })).toMatchObject({ allowed: false, retryAfter: 300 });
      expect((await store.peek(key, policy, { now: T0 + 200 })).allowed).toBe(true);
      // …until the retry instant, where it asks the store again.
      expect(await a.limit(key, policy, { now: T0 + 500 })).toMatchObject({ allowed: true, remaining: 0 });
    });
  });
});

describe('over-limit cache in tollgate serve (on by default)', () => {
  const start = (flags: Record<string, string> = {}) =>
    startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', ...flags }, {}));
  const check = async (port: number): Promise<{ status: number; body: { statuses: { code: string; durationUntilReset: number }[] } }> => {
    const body = JSON.stringify({ domain: 'classic', descriptors: [{ entries: [{ key: 'action', value: 'login' }, { key: 'user', value: 'mallory' }] }] });
    const response = await fetch(`http://127.0.0.1:${port}/json`, { method: 'POST', body });
    return { status: response.status, body: (await response.json()) as never };
  };
  const cacheHits = async (port: number): Promise<number | undefined> => {
    const line = (await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()).split('\n').find((text) => text.startsWith('tollgate_over_limit_with_local_cache_total '));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  };

  it('answers a denied key locally, counted as tollgate_over_limit_with_local_cache_total; --local-cache-keys 0 turns it off', async () => {
    const service = await start();
    const off = await start({ 'local-cache-keys': '0' });
    try {
      const answers = [];
      for (let i = 0; i < 10; i++) answers.push(await check(service.httpPort!));
      const denied = answers.filter((answer) => answer.status === 429);
      expect(denied.length).toBeGreaterThan(2);
      expect(denied.every((answer) => answer.body.statuses[0]!.code === 'OVER_LIMIT')).toBe(true);
      expect(await cacheHits(service.adminPort)).toBe(denied.length - 1);
      for (let i = 0; i < 10; i++) await check(off.httpPort!);
      expect(await cacheHits(off.adminPort)).toBeUndefined();
    } finally {
      await Promise.all([service.close(), off.close()]);
    }
  });
});
