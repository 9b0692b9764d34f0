/**
 * The Redis store against real redis-server processes: script loading and recovery, batching,
 * keys and TTLs, foreign or corrupt keys, an unreachable server, and all-or-nothing multi-limit
 * checks, on a single node and on a 3-master Cluster.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  StoreDataError,
  StoreUnavailableError,
  createLimiter,
  compilePolicy,
  memoryStore,
  redisStore,
  type Policy,
  type RedisStore,
  type RedisStoreOptions,
} from '../../../src/index.js';
import { ALGORITHMS } from '../../../src/algorithms/catalog.js';
import { DECIDE_SCRIPT } from '../../../src/store/redis/lua.js';
import { freePort, startRedis } from '../../support/redis.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const NOW = 1_700_000_000_000;
const PER_MINUTE: Policy = { algorithm: 'fixed-window', limit: 3, window: '1m' };

const redis = useRedisTopologies();
const open = (options: RedisStoreOptions): Promise<RedisStore> => redis.open(options);
/** Stores made here without open() (never connected): closed after the file's tests. */
const stores: RedisStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
});

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}`;
}

describe('the decision script', () => {
  it('has a pinned SHA1 (a changed script must change this test on purpose)', () => {
    expect(DECIDE_SCRIPT.sha1).toBe('16d6a1ecd0ff0852bd180ab853c414f4620d566d');
  });

  it('is what Redis computes for SCRIPT LOAD', () => {
    expect(redis.single.cli('SCRIPT', 'LOAD', DECIDE_SCRIPT.source).trim()).toBe(DECIDE_SCRIPT.sha1);
  });

  it('survives SCRIPT FLUSH without a failed decision', async () => {
    const limiter = createLimiter({ store: await open({ url: redis.single.url }), deadlineMs: 10_000 });
    const key = unique('flush');
    expect((await limiter.limit(key, PER_MINUTE, { now: NOW })).remaining).toBe(2);
    redis.single.cli('SCRIPT', 'FLUSH');
    expect((await limiter.limit(key, PER_MINUTE, { now: NOW })).remaining).toBe(1);
    expect(redis.single.cli('SCRIPT', 'EXISTS', DECIDE_SCRIPT.sha1).trim()).toBe('1');
  });

  it('survives a Redis restart: once reconnected, decisions succeed (scripts are loaded again)', async () => {
    const server = await startRedis();
    try {
      const store = await open({ url: server.url });
      const limiter = createLimiter({ store, deadlineMs: 10_000 });
      expect((await limiter.limit('k', PER_MINUTE, { now: NOW })).allowed).toBe(true);
      await server.restart();
      await expect.poll(() => store.ready().then(() => true, () => false), { timeout: 10_000 }).toBe(true);
      // The restart lost both the state and the script: the first decision re-sends the script.
      await expect.poll(async () => (await limiter.limit('k', PER_MINUTE, { now: NOW }).catch(() => undefined))?.remaining, { timeout: 10_000 }).toBe(2);
    } finally {
      await server.stop();
    }
  }, 30_000);

  it('fails loudly on bad arguments rather than writing NaN', async () => {
    const client = new Redis(redis.single.url);
    try {
      const key = unique('tollgate:{bad}');
      const call = (args: (string | number)[]) => client.eval(DECIDE_SCRIPT.source, 1, key, ...args);
      // [now, policies, algorithm, window, limit, capacity, nominal, count_rejected, first_hit, precision, block, groups, size, policy, op, cost]
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 'NaN'])).rejects.toThrow(/argument 16 \(cost\) is not valid: NaN/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 1.5])).rejects.toThrow(/argument 16 \(cost\) is not valid: 1.5/);
      await expect(call(['', 1, 3, 1000, 0, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/limit, capacity and nominal capacity must be >= 1/);
      await expect(call(['soon', 1, 3, 1000, 10, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 1 \(now\)/);
      await expect(call(['', 1, 9, 1000, 10, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 3 \(policy 1 algorithm\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 0, 1, 0, 1, 1, 2, 1, 1])).rejects.toThrow(/argument 14 \(policy index\)/);
      await expect(call(['', 1, 3, 'Infinity', 10, 10, 10, 0, 0, 1, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 4 \(policy 1 window\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 3, 1, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 9 \(policy 1 first_hit\)/);
      // first_hit 2, a calendar window: fixed-window only, followed (after block) by boundaries b0 < b1 < b2.
      await expect(call(['', 1, 1, 1000, 10, 10, 10, 0, 2, 1, 0, 0, 1, 2, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 9 \(policy 1 first_hit\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 2, 1, 0, 5, 5, 9, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 12 \(policy 1 calendar boundaries b0 < b1 < b2\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 2, 1, 0, 0, 5, 'x', 1, 1, 1, 1, 1])).rejects.toThrow(/argument 12 \(policy 1 calendar boundaries/);
      await expect(call(['', 1, 5, 1000, 10, 10, 10, 0, 0, 0, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 10 \(policy 1 precision\)/);
      await expect(call(['', 1, 5, 1000, 10, 10, 10, 0, 0, 101, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 10 \(policy 1 precision\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 0, 4, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 10 \(policy 1 precision\)/);
      await expect(call(['', 1, 5, 50, 10, 10, 10, 0, 0, 60, 0, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 10 \(policy 1 precision\)/);
      await expect(call(['', 1, 3, 1000, 10, 10, 10, 0, 0, 1, 2592000001, 1, 1, 1, 1, 1])).rejects.toThrow(/argument 11 \(policy 1 block\)/);
      expect(await client.exists(key)).toBe(0);
    } finally {
      client.disconnect();
    }
  });
});

describe('batching', () => {
  it('decides concurrent calls of one tick in a few script calls, not one each', async () => {
    const server = await startRedis();
    try {
      // One explicit instant: on Redis TIME a batch that crossed a minute boundary would admit twice.
      const limiter = createLimiter({ store: await open({ url: server.url }), deadlineMs: 5_000 });
      server.cli('CONFIG', 'RESETSTAT');
      const decisions = await Promise.all(Array.from({ length: 1000 }, (_, i) => limiter.limit(`user:${i % 50}`, PER_MINUTE, { now: NOW })));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(150);
      const stats = server.cli('INFO', 'commandstats');
      const calls = Number(/cmdstat_(?:evalsha|eval):calls=(\d+)/.exec(stats)?.[1] ?? 'NaN');
      expect(calls).toBeGreaterThanOrEqual(16); // at most 64 decisions per call
      expect(calls).toBeLessThanOrEqual(24);
    } finally {
      await server.stop();
    }
  });
});

describe('batching on a Cluster', () => {
  it('spread keys of one tick, pipelined per master, each get their own answer; a foreign key fails only its own call', async () => {
    const store = await open({ cluster: redis.cluster.nodes });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const run = unique('spread');
    const foreign = `${run}:foreign`;
    await store.client.hset(store.redisKey(foreign, compilePolicy(PER_MINUTE)), 'owner', 'another-app');
    // Lone decisions on Redis TIME (FCALL) and on an explicit instant (the batch script) in one tick.
    const keys = Array.from({ length: 300 }, (_, i) => `${run}:${i}`);
    const round = (): Promise<PromiseSettledResult<{ remaining: number }>[]> =>
      Promise.allSettled([
        ...keys.map((key, i) => limiter.limit(key, { ...PER_MINUTE, limit: 3 + (i % 3) }, i % 2 === 0 ? { now: NOW } : {})),
        limiter.limit(foreign, PER_MINUTE),
      ]);
    for (const spent of [1, 2]) {
      const results = await round();
      const answers = results.slice(0, -1).map((result) => (result.status === 'fulfilled' ? result.value.remaining : 'failed'));
      expect(answers).toEqual(keys.map((_, i) => 3 + (i % 3) - spent));
      expect(results.at(-1)!.status).toBe('rejected');
      expect(((results.at(-1) as PromiseRejectedResult).reason as Error).message).toMatch(/holds a value of another type/);
    }
  });
});

describe('keys', () => {
  it('are readable, prefixed, escaped, and expire with their state', async () => {
    const store = await open({ url: redis.single.url, keyPrefix: 'app:' });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    await limiter.limit('user:{42}%', PER_MINUTE);
    const key = store.redisKey('user:{42}%', compilePolicy(PER_MINUTE));
    expect(key).toBe('app:{user:%7B42%7D%25}f1m');
    const ttl = Number(redis.single.cli('PTTL', key).trim());
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // The window's count alone; the key expires at the window's end, the round minute.
    expect(redis.single.cli('GET', key).trim()).toBe('1');
    expect(Number(redis.single.cli('PEXPIRETIME', key).trim()) % 60_000).toBe(0);
  });

  it('never map two identities to one key', async () => {
    const store = await open({ url: redis.single.url });
    const policy = compilePolicy(PER_MINUTE);
    const identities = ['a{b}', 'a%7Bb%7D', 'a}:fw:1m', 'a}f1m', 'a', '{a}', '%'];
    const keys = identities.map((identity) => store.redisKey(identity, policy));
    expect(new Set(keys).size).toBe(identities.length);
    for (const key of keys) expect(key.match(/[{}]/g)).toEqual(['{', '}']);
  });

  it('with braces in the identity still land in the identity\'s own slot on a Cluster', async () => {
    const limiter = createLimiter({ store: await open({ cluster: redis.cluster.nodes }), deadlineMs: 10_000 });
    for (const identity of ['x{y', 'x}y', '{tag}rest', 'plain']) {
      const d1 = await limiter.limit(identity, PER_MINUTE, { now: NOW });
      const d2 = await limiter.limit(identity, PER_MINUTE, { now: NOW });
      expect([d1.remaining, d2.remaining], identity).toEqual([2, 1]);
    }
  });
});

describe('foreign and corrupt keys', () => {
  it('a key of another type is a typed error and is left alone; other decisions of the batch go on', async () => {
    const store = await open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const key = store.redisKey('foreign', compilePolicy(PER_MINUTE));
    redis.single.cli('HSET', key, 'owner', 'another-app');
    const [foreign, normal] = await Promise.allSettled([limiter.limit('foreign', PER_MINUTE), limiter.limit(unique('normal'), PER_MINUTE)]);
    expect(foreign.status).toBe('rejected');
    const error = (foreign as PromiseRejectedResult).reason as StoreDataError;
    expect(error).toBeInstanceOf(StoreDataError);
    expect(error.code).toBe('ERR_TOLLGATE_STORE_DATA');
    expect(error.message).toMatch(/holds a value of another type/);
    expect(normal.status).toBe('fulfilled');
    expect(redis.single.cli('HGET', key, 'owner').trim()).toBe('another-app');
  });

  it('unreadable state is a typed error and is not overwritten', async () => {
    const store = await open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    for (const algorithm of ['token-bucket', 'sliding-window', 'sliding-log'] as const) {
      const policy: Policy = { algorithm, limit: 5, window: 1000 };
      const key = store.redisKey('corrupt', compilePolicy(policy));
      if (algorithm === 'sliding-log') redis.single.cli('RPUSH', key, 'not numbers');
      else redis.single.cli('SET', key, '12 abc');
      await expect(limiter.limit('corrupt', policy)).rejects.toThrow(/holds state Tollgate cannot read/);
    }
    expect(redis.single.cli('GET', store.redisKey('corrupt', compilePolicy({ algorithm: 'token-bucket', limit: 5, window: 1000 }))).trim()).toBe('12 abc');
  });
});

describe('an unreachable Redis', () => {
  it('ready() names the address; a decision answers by the failure mode within its deadline; nothing crashes', async () => {
    const port = await freePort();
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 300 });
    stores.push(store);
    await expect(store.ready()).rejects.toThrow(new RegExp(`Redis at redis://127.0.0.1:${port} is not reachable after 300 ms`));
    const started = Date.now();
    const decision = await createLimiter({ store }).limit('k', PER_MINUTE);
    expect(decision).toMatchObject({ allowed: true, reason: 'local-fallback', remaining: PER_MINUTE.limit - 1 });
    expect(Date.now() - started).toBeLessThan(100);
  });

  it('ready() gives up once connections have been refused for a second, not after the whole 5 s connect timeout, and says so', async () => {
    const port = await freePort();
    const store = redisStore({ url: `redis://127.0.0.1:${port}` });
    stores.push(store);
    const started = performance.now();
    const failure = await store.ready().then(() => undefined, (error: unknown) => error as Error);
    const waited = performance.now() - started;
    expect(failure?.message).toMatch(new RegExp(`Redis at redis://127.0.0.1:${port} is not reachable after \\d+ ms \\(connect ECONNREFUSED`));
    // At least the grace a server starting beside us gets, and well before the 5 s timeout.
    expect(waited).toBeGreaterThanOrEqual(1_000);
    expect(waited).toBeLessThan(4_000);
  });

  it('decisions made before the first connection is up wait for it (no ready() call needed)', async () => {
    const store = redisStore({ url: redis.single.url });
    stores.push(store);
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const decisions = await Promise.all([limiter.limit('early', PER_MINUTE), limiter.limit('early', PER_MINUTE)]);
    expect(decisions.map((d) => d.remaining)).toEqual([PER_MINUTE.limit - 1, PER_MINUTE.limit - 2]);
    expect(decisions.map((d) => d.reason)).toEqual([undefined, undefined]);
  });

  it('without ready(), a decision on an unreachable Redis waits for the connection no longer than its deadline', async () => {
    const port = await freePort();
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 5_000 });
    stores.push(store);
    const limiter = createLimiter({ store, deadlineMs: 150, failureMode: 'closed' });
    const started = Date.now();
    expect(await limiter.limit('k', PER_MINUTE)).toMatchObject({ allowed: false, reason: 'fail-closed', retryAfter: 1_000 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(Date.now() - started).toBeLessThan(400);
  });

  it("failureMode 'throw' rejects with the store's typed error, and at once once the breaker is open", async () => {
    const port = await freePort();
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 100 });
    stores.push(store);
    await store.ready().catch(() => undefined);
    const limiter = createLimiter({ store, failureMode: 'throw', breaker: { failureThreshold: 2, openMs: 60_000 } });
    for (let i = 0; i < 2; i++) await expect(limiter.limit('k', PER_MINUTE)).rejects.toThrow(StoreUnavailableError);
    expect(limiter.health().breaker).toBe('open');
    const started = Date.now();
    const error = await limiter.limit('k', PER_MINUTE).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect((error as Error).message).toMatch(/circuit breaker open/);
    expect(Date.now() - started).toBeLessThan(20);
  });

  it('hides the password in messages', () => {
    const store = redisStore({ url: 'redis://user:secret@127.0.0.1:1' });
    stores.push(store);
    expect(store.address).toBe('redis://***@127.0.0.1:1');
  });
});

describe('options', () => {
  it.each([
    [{}, /exactly one of url, client, cluster or sentinels \(got none\)/],
    [{ url: 'redis://x:1', cluster: [{ host: 'x', port: 1 }] }, /got url and cluster/],
    [{ url: '127.0.0.1:6379' }, /url must look like redis:\/\/host:port/],
    [{ url: 'redis://x:1', keyPrefix: 'a{b' }, /keyPrefix must be a string without \{ or \}/],
    [{ url: 'redis://x:1', commandTimeoutMs: 0 }, /commandTimeoutMs must be a whole number ≥ 1/],
    [{ cluster: [] }, /cluster must be a non-empty list/],
    [{ cluster: [{ host: 'x', port: 70000 }] }, /cluster\[0\] must be/],
    [{ url: 'redis://x:1', timeout: 5 }, /unknown option "timeout"/],
  ])('%j is refused', (options, message) => {
    expect(() => redisStore(options as never)).toThrow(InvalidOptionError);
    expect(() => redisStore(options as never)).toThrow(message);
  });
});

describe.each([
  ['single Redis', () => ({ url: redis.single.url })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes })],
])('multi-limit checks on %s', (_name, options) => {
  it('are all-or-nothing: when one limit denies, no other counter moves', async () => {
    const limiter = createLimiter({ store: await open(options()), deadlineMs: 10_000 });
    const perIp: Policy = { algorithm: 'token-bucket', limit: 10, window: '1m' };
    const perUser: Policy = { algorithm: 'sliding-log', limit: 2, window: '1m' };
    const ip = unique('ip');
    const user = unique('user');
    const both = [
      { key: ip, policy: perIp },
      { key: user, policy: perUser },
    ];
    expect((await limiter.limitAll(both, { now: NOW })).map((d) => d.allowed)).toEqual([true, true]);
    expect((await limiter.limitAll(both, { now: NOW + 1 })).map((d) => d.allowed)).toEqual([true, true]);
    // The user limit is exhausted: the request is denied and the IP bucket does not move.
    const denied = await limiter.limitAll(both, { now: NOW + 2 });
    expect(denied.map((d) => d.allowed)).toEqual([true, false]);
    expect((await limiter.peek(ip, perIp, { now: NOW + 2 })).remaining).toBe(7);
    const fixed: Policy = { algorithm: 'fixed-window', limit: 0, window: '1m' };
    const withZero = await limiter.limitAll([{ key: ip, policy: perIp }, { key: unique('z'), policy: fixed }], { now: NOW + 2 });
    expect(withZero.map((d) => d.reason)).toEqual([undefined, 'limit-zero']);
    expect((await limiter.peek(ip, perIp, { now: NOW + 2 })).remaining).toBe(7);
  });
});

describe('an explicit now on Redis means what it means in memory, however much real time passes', () => {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('fixed window 3/s at a fixed now: denied, and still denied 1.2 s of real time later', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const policy = { algorithm: 'fixed-window', limit: 3, window: '1s' } as const;
    const now = Date.UTC(2026, 0, 1, 12, 0, 0, 100);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await limiter.limit('replay-fw', policy, { now })).allowed);
    expect(answers).toEqual([true, true, true, false]);
    await sleep(1_200);
    expect((await limiter.limit('replay-fw', policy, { now })).allowed).toBe(false);
  });

  it('a 1 ms window admits exactly its limit in that millisecond, however slowly the calls come', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy = { algorithm: 'fixed-window', limit: 1, window: 1 } as const;
    const now = Date.UTC(2026, 0, 1, 12, 0, 0, 0);
    const onRedis = [];
    const inMemory = [];
    for (let i = 0; i < 20; i++) {
      onRedis.push((await limiter.limit('replay-1ms', policy, { now })).allowed);
      inMemory.push((await memory.limit('replay-1ms', policy, { now })).allowed);
      await sleep(5);
    }
    expect(onRedis).toEqual(inMemory);
    expect(onRedis.filter(Boolean)).toHaveLength(1);
  });

  it('a key written at a now 2 h behind Redis TIME lives resetAt − now, plus the lag capped at one hour, plus 1 s (10 min behind: plus the 10 min), for every algorithm', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const HOUR = 3_600_000;
    const redisTime = (): number => {
      const [seconds = NaN, micros = NaN] = redis.single.cli('TIME').trim().split('\n').map(Number);
      return seconds * 1_000 + Math.floor(micros / 1_000);
    };
    for (const algorithm of ALGORITHMS) {
      const policy: Policy = { algorithm, limit: 3, window: '1m' };
      for (const lag of [2 * HOUR, HOUR / 6]) {
        const before = redisTime();
        const now = before - lag;
        const key = unique(`lag-${algorithm}`);
        const decision = await limiter.limit(key, policy, { now });
        const after = redisTime();
        // Written at Redis time t (between the two readings), the key expires at
        // t + (resetAt − now) + min(t − now, 1 h) + 1 s.
        const expiry = (t: number): number => t + (decision.resetAt - now) + Math.min(t - now, HOUR) + 1_000;
        const expiresAt = Number(redis.single.cli('PEXPIRETIME', store.redisKey(key, compilePolicy(policy))).trim());
        expect(expiresAt, `${algorithm}, ${lag} ms behind`).toBeGreaterThanOrEqual(expiry(before));
        expect(expiresAt, `${algorithm}, ${lag} ms behind`).toBeLessThanOrEqual(expiry(after));
      }
    }
  });
});

describe('look on Redis', () => {
  it.each(['single', 'cluster'] as const)('%s: a peek of cost 0 reports the quota as it stands, as in memory', async (topology) => {
    const store = await redis.open(topology === 'single' ? { url: redis.single.url } : { cluster: redis.cluster.nodes });
    const limiter = createLimiter({ store, deadlineMs: 10_000 });
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const now = Date.UTC(2026, 0, 1, 12, 0, 0, 0);
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'fixed-window', 'sliding-log', 'sliding-window', 'gcra'] as const) {
      const policy = { algorithm, limit: 3, window: '1s' } as const;
      for (let i = 0; i < 4; i++) {
        await limiter.limit(`look-${algorithm}`, policy, { now });
        await memory.limit(`look-${algorithm}`, policy, { now });
        expect(await limiter.look(`look-${algorithm}`, policy, { now: now + 10 }), `${algorithm} after ${i + 1}`).toEqual(
          await memory.look(`look-${algorithm}`, policy, { now: now + 10 }),
        );
      }
    }
  });
});
