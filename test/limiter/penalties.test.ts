/**
 * Penalties (`blockDuration`): a denial blocks its key for the block's length from that denial, on
 * every node sharing the store (the block lives in Redis beside the key's state), to the ms; the
 * over-limit cache answers a block until its end without asking the store. What each algorithm
 * answers step by step is in the conformance vectors (test/vectors/blocks/).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, InvalidPolicyError, memoryStore, redisStore, type Decision, type Policy } from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';

const redis = useRedisServer();
const T0 = 1_700_000_000_000;
/** One request a second, then ten seconds of penalty. */
const POLICY: Policy = { algorithm: 'token-bucket', limit: 1, window: '1s', blockDuration: '10s' };
const WORKER = new URL('../support/block-worker.mjs', import.meta.url).pathname;
const run = promisify(execFile);

let keys = 0;
function uniqueKey(name: string): string {
  keys += 1;
  return `${name}:${keys}:${Math.random().toString(36).slice(2)}`;
}

async function openLimiter(options: { overLimitCache?: boolean } = {}): Promise<ReturnType<typeof createLimiter>> {
  const store = redisStore({ url: redis.url });
  redis.stores.push(store);
  await store.ready();
  return createLimiter({ store, deadlineMs: 5_000, ...options });
}

/** Script calls Redis has run since the last CONFIG RESETSTAT (every decision is one). */
function scriptCalls(): number {
  const stats = redis.cli('INFO', 'commandstats');
  let calls = 0;
  for (const match of stats.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)) calls += Number(match[1]);
  return calls;
}

describe('a penalty on Redis', () => {
  it('set by one limiter is honoured by another on its own connection, to the ms of its end', async () => {
    const [first, second] = await Promise.all([openLimiter(), openLimiter()]);
    const key = uniqueKey('two-limiters');
    expect((await first.limit(key, POLICY, { now: T0 })).allowed).toBe(true);
    expect(await first.limit(key, POLICY, { now: T0 + 1 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 10_000 });
    // By 5 s the bucket is full again, yet the other limiter is refused: the block is in the store.
    expect(await second.limit(key, POLICY, { now: T0 + 5_000 })).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0, retryAfter: 5_001 });
    // A denial during the block does not extend it: the end stays T0 + 1 + 10 s.
    expect(await second.limit(key, POLICY, { now: T0 + 10_000 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 1 });
    const atEnd: Decision = await second.limit(key, POLICY, { now: T0 + 10_001 });
    expect(atEnd.allowed).toBe(true);
    expect(atEnd.reason).toBeUndefined();
  });

  it('set by one OS process is honoured by another', async () => {
    const limiter = await openLimiter();
    const key = uniqueKey('two-processes');
    const inWorker = async (now: number): Promise<Decision> => JSON.parse((await run(process.execPath, [WORKER, redis.url, JSON.stringify(POLICY), key, String(now)])).stdout) as Decision;
    // The worker process spends the quota and is denied: it starts the block.
    expect((await inWorker(T0)).allowed).toBe(true);
    expect(await inWorker(T0 + 1)).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 10_000 });
    // This process is refused until the block's end, admitted at it.
    expect(await limiter.limit(key, POLICY, { now: T0 + 3_000 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 7_001 });
    expect(await limiter.limit(key, POLICY, { now: T0 + 10_000 })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 1 });
    expect((await limiter.limit(key, POLICY, { now: T0 + 10_001 })).allowed).toBe(true);
  }, 20_000);

  it('lives beside the state, under its hash tag, and expires with the block', async () => {
    const limiter = await openLimiter();
    const key = uniqueKey('beside');
    await limiter.limit(key, POLICY);
    expect(await limiter.limit(key, POLICY)).toMatchObject({ allowed: false, reason: 'blocked' });
    const stored = redis.cli('KEYS', `tollgate:{${key}}*`).trim().split('\n').sort();
    expect(stored).toEqual([`tollgate:{${key}}t1s`, `tollgate:{${key}}t1s!b`]);
    const ttl = Number(redis.cli('PTTL', `tollgate:{${key}}t1s!b`));
    expect(ttl).toBeGreaterThan(9_000);
    expect(ttl).toBeLessThanOrEqual(10_000);
    // A reset lifts it with the state.
    await limiter.reset(key, POLICY);
    expect(redis.cli('EXISTS', `tollgate:{${key}}t1s!b`).trim()).toBe('0');
    expect((await limiter.limit(key, POLICY)).allowed).toBe(true);
  });

  it('is answered by the over-limit cache until its end without a store call', async () => {
    const limiter = await openLimiter({ overLimitCache: true });
    const key = uniqueKey('cached');
    await limiter.limit(key, POLICY, { now: T0 });
    expect(await limiter.limit(key, POLICY, { now: T0 + 1 })).toMatchObject({ allowed: false, reason: 'blocked' });
    redis.cli('CONFIG', 'RESETSTAT');
    for (let at = T0 + 2; at <= T0 + 10_000; at += 100) {
      expect(await limiter.limit(key, POLICY, { now: at })).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: T0 + 10_001 - at });
    }
    expect(scriptCalls()).toBe(0);
    expect((await limiter.limit(key, POLICY, { now: T0 + 10_001 })).allowed).toBe(true);
    expect(scriptCalls()).toBe(1);
  });
});

describe('a penalty in a group of limits', () => {
  const ROOMY: Policy = { algorithm: 'fixed-window', limit: 10, window: '1m' };
  it.each(['memory', 'redis'])('on the %s store: a blocked key denies its group, and nothing of the group is spent', async (where) => {
    const limiter = where === 'memory' ? createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) }) : await openLimiter();
    const [blocked, other] = [uniqueKey('group-blocked'), uniqueKey('group-other')];
    await limiter.limit(blocked, POLICY, { now: T0 });
    // Denied inside a group: the denial starts the block as alone.
    const [first] = await limiter.limitAll([{ key: blocked, policy: POLICY }, { key: other, policy: ROOMY }], { now: T0 + 1 });
    expect(first).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 10_000 });
    const [held, spared] = await limiter.limitAll([{ key: blocked, policy: POLICY }, { key: other, policy: ROOMY }], { now: T0 + 5_000 });
    expect(held).toMatchObject({ allowed: false, reason: 'blocked', retryAfter: 5_001 });
    expect(spared).toMatchObject({ allowed: true, remaining: 10 });
    expect(await limiter.limit(other, ROOMY, { now: T0 + 5_000 })).toMatchObject({ allowed: true, remaining: 9 });
    if (where === 'memory') await limiter.close();
  });
});

describe('lifting a penalty', () => {
  it.each(['memory', 'redis'])('on the %s store: resetPrefix lifts the blocks of the keys it resets, and only those', async (where) => {
    const limiter = where === 'memory' ? createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) }) : await openLimiter();
    const prefix = uniqueKey('prefix');
    const [inside, outside] = [`${prefix}:a`, uniqueKey('outside')];
    for (const key of [inside, outside]) {
      await limiter.limit(key, POLICY, { now: T0 });
      expect(await limiter.limit(key, POLICY, { now: T0 + 1 })).toMatchObject({ reason: 'blocked' });
    }
    await limiter.resetPrefix(prefix);
    expect((await limiter.limit(inside, POLICY, { now: T0 + 2 })).allowed).toBe(true);
    expect(await limiter.limit(outside, POLICY, { now: T0 + 2 })).toMatchObject({ allowed: false, reason: 'blocked' });
    if (where === 'memory') await limiter.close();
  });
});

describe('blockDuration', () => {
  it.each([0, -5, 1.5, Number.NaN, '10', '10x', '0s', '31d', 'soon', null, true])('refuses %s, naming the field', (value) => {
    expect(() => compilePolicy({ ...POLICY, blockDuration: value as never })).toThrow(InvalidPolicyError);
    expect(() => compilePolicy({ ...POLICY, blockDuration: value as never })).toThrow(/blockDuration/);
  });

  it('takes milliseconds or a duration with its unit, up to 30 days', () => {
    expect(compilePolicy({ ...POLICY, blockDuration: 1 }).blockMs).toBe(1);
    expect(compilePolicy({ ...POLICY, blockDuration: '10m' }).blockMs).toBe(600_000);
    expect(compilePolicy({ ...POLICY, blockDuration: '30d' }).blockMs).toBe(30 * 86_400_000);
    expect(compilePolicy({ algorithm: 'token-bucket', limit: 1, window: '1s' }).blockMs).toBe(0);
  });

  it('is refused with a lease or local-first, which admit without asking the store where the block is', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const windowed: Policy = { algorithm: 'fixed-window', limit: 10, window: '1s', blockDuration: '1m' };
    for (const options of [{ lease: 5 }, { syncIntervalMs: 100 }]) {
      await expect(Promise.resolve().then(() => limiter.limit('k', windowed, options))).rejects.toThrow(/admits without asking the store.*blockDuration/);
    }
    await limiter.close();
  });
});
