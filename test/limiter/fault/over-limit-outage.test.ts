/**
 * The over-limit cache and the failure modes on a real Redis that the tests stall (SIGSTOP:
 * connections open, no answers) or kill and restart empty, on a controlled clock (the breaker's
 * open period and every retry instant are set by the test; only the deadlines run in real time):
 * - a key the store denied stays denied by the cache until its retry instant whatever the store
 *   does meanwhile, even under `failure_mode: open` (docs/scaling.md, docs/operations.md);
 * - the cache never remembers a special or degraded answer (docs/scaling.md);
 * - what the `local` failure mode counts during an outage is never written to Redis
 *   (docs/operations.md, "Counts made locally meanwhile").
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type Limiter, type Policy } from '../../../src/index.js';
import { liveStore, useRedisServer, whileStalled } from '../../support/redis-topologies.js';

const redis = useRedisServer();
const T0 = 1_700_000_000_000;
/** 2 a second: after 2 at T0 the key is denied until T0 + 500. */
const GCRA: Policy = { algorithm: 'gcra', limit: 2, window: 1_000 };
const HOURLY: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
/** Whether a decision admitted, and who decided it: the store, or the reason it gives. */
const answered = (decision: Decision): [boolean, string] => [decision.allowed, decision.reason ?? 'the store'];
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

/** A limiter on its own connection to the file's Redis, on the clock `now()`, deadline 50 ms. */
async function node(now: () => number, options: Parameters<typeof createLimiter>[0] = {}): Promise<Limiter> {
  return createLimiter({ store: await liveStore(redis), clock: now, deadlineMs: 50, ...options });
}

/** Opens `limiter`'s breaker: 5 calls on other keys fail at once (the default failureThreshold). */
async function openBreaker(limiter: Limiter): Promise<void> {
  const answers = await Promise.all(Array.from({ length: 5 }, () => limiter.limit(unique('trip'), HOURLY)));
  expect(answers.every((answer) => answer.reason !== undefined)).toBe(true);
  expect(limiter.health().breaker).toBe('open');
}

/** The store's denial of `key` at T0 (2 admitted, the third denied until T0 + 500). */
async function deniedAtT0(limiter: Limiter, key: string): Promise<Decision> {
  for (let i = 0; i < 2; i++) expect((await limiter.limit(key, GCRA)).allowed).toBe(true);
  const denied = await limiter.limit(key, GCRA);
  expect([denied.allowed, denied.retryAfter, denied.reason]).toEqual([false, 500, undefined]);
  return denied;
}

describe('the over-limit cache answers before the failure modes', () => {
  it('a key the store denied stays denied until its retry instant while the store is stalled and the breaker open, under failure_mode open', async () => {
    let now = T0;
    const limiter = await node(() => now, { overLimitCache: true, failureMode: 'open' });
    const key = unique('attacker');
    const denied = await deniedAtT0(limiter, key);
    const [during, atRetry] = await whileStalled(redis, async () => {
      await openBreaker(limiter);
      const answers: Decision[] = [];
      for (const at of [T0 + 100, T0 + 499]) {
        now = at;
        answers.push(await limiter.limit(key, GCRA));
      }
      // Another key, not denied before: the failure mode answers it.
      expect((await limiter.limit(unique('other'), GCRA)).reason).toBe('fail-open');
      now = T0 + 500;
      return [answers, await limiter.limit(key, GCRA)] as const;
    });
    expect(during).toEqual([
      { ...denied, retryAfter: 400, now: T0 + 100 },
      { ...denied, retryAfter: 1, now: T0 + 499 },
    ]);
    // At its retry instant the cache lets go, and the failure mode answers as for any other key.
    expect([atRetry.allowed, atRetry.reason]).toEqual([true, 'fail-open']);
  });

  it('a key the store denied stays denied until its retry instant while Redis is down, and after it came back empty (where the store would admit it)', async () => {
    let now = T0;
    const store = await liveStore(redis);
    // openMs 1: a probe that fails opens the breaker for 1 ms of the test's clock, not 200.
    const limiter = await node(() => now, { store, overLimitCache: true, failureMode: 'open', breaker: { openMs: 1 } });
    const key = unique('attacker');
    const denied = await deniedAtT0(limiter, key);
    process.kill(redis.pid, 'SIGKILL');
    now = T0 + 100;
    await openBreaker(limiter);
    expect(await limiter.limit(key, GCRA)).toEqual({ ...denied, retryAfter: 400, now: T0 + 100 });
    await redis.restart(); // nothing persisted: the key's state is gone
    // The emptied store, asked by a limiter without the cache, admits the key at once…
    const uncached = await node(() => now);
    expect(answered(await uncached.peek(key, GCRA))).toEqual([true, 'the store']);
    // …the cache keeps denying it until its retry instant, while the breaker probes the store again.
    await store.ready(); // the limiter's own connection is back (ioredis reconnects with a backoff)
    now = T0 + 300;
    // A probe that misses its 50 ms deadline on a busy machine opens the breaker again until
    // now + openMs; on a clock that stood still it would never probe again (CI saw that wait
    // outlast 15 s). So each answer from the failure mode moves the clock on by openMs.
    await expect
      .poll(async () => {
        const reason = (await limiter.limit(unique('probe'), GCRA)).reason;
        if (reason !== undefined) now += 1;
        return reason;
      }, { timeout: 5_000, interval: 20 })
      .toBeUndefined();
    expect(now).toBeLessThan(T0 + 500);
    expect(await limiter.limit(key, GCRA)).toEqual({ ...denied, retryAfter: T0 + 500 - now, now });
    now = T0 + 500;
    const after = await limiter.limit(key, GCRA);
    expect([...answered(after), after.remaining]).toEqual([true, 'the store', 1]);
  });

  it('never remembers a special or degraded answer: limit-zero, cost-exceeds-capacity, a failure mode\'s denial', async () => {
    const now = T0;
    const closed = await node(() => now, { overLimitCache: true, failureMode: 'closed' });
    const local = await node(() => now, { overLimitCache: true, failureMode: 'local' });
    const [k, l] = [unique('closed'), unique('local')];
    expect(await closed.limit(k, { ...GCRA, limit: 0 })).toMatchObject({ allowed: false, reason: 'limit-zero' });
    expect(await closed.limit(k, GCRA, { cost: 3 })).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity' });
    expect(closed.overLimitCacheStats()).toMatchObject({ keys: 0 });
    const one: Policy = { algorithm: 'fixed-window', limit: 1, window: '1h' };
    const degraded = await whileStalled(redis, async () => [
      await closed.limit(k, GCRA),
      await local.limit(l, one),
      await local.limit(l, one),
    ]);
    expect(degraded.map((d) => [d.allowed, d.reason])).toEqual([[false, 'fail-closed'], [true, 'local-fallback'], [false, 'local-fallback']]);
    expect([closed.overLimitCacheStats()!.keys, local.overLimitCacheStats()!.keys]).toEqual([0, 0]);
    // Redis answers again: the store decides both keys (it ran the stalled calls late: 1 counted on each).
    expect(answered(await closed.limit(k, GCRA))).toEqual([true, 'the store']);
    const again = await local.limit(l, { ...one, limit: 3 });
    expect([...answered(again), again.remaining]).toEqual([true, 'the store', 1]);
    expect([closed.overLimitCacheStats()!.hits, local.overLimitCacheStats()!.hits]).toEqual([0, 0]);
  });
});

describe('counts made locally during an outage', () => {
  it('are not written back: after the outage, Redis counts only what it decided itself', async () => {
    let now = T0;
    // A prefix of its own: the only node counted on it, so `local` enforces the whole limit (10).
    const prefix = `${unique('alone')}:`;
    const limiter = await node(() => now, { store: await liveStore(redis, { keyPrefix: prefix }) });
    const key = unique('local');
    for (let i = 0; i < 3; i++) expect((await limiter.limit(key, HOURLY)).reason).toBeUndefined();
    // While the breaker is open (the clock stands: it stays open) no call on the key reaches Redis.
    const local = await whileStalled(redis, async () => {
      await openBreaker(limiter);
      return Promise.all(Array.from({ length: 5 }, () => limiter.limit(key, HOURLY)));
    });
    expect(local.map((d) => [d.allowed, d.reason])).toEqual(Array.from({ length: 5 }, () => [true, 'local-fallback']));
    now += 200; // the breaker's open period: it probes, and Redis decides again
    const back = await limiter.limit(key, HOURLY);
    expect([back.allowed, back.reason, back.remaining]).toEqual([true, undefined, 10 - 3 - 1]);
    // Another node reads Redis's count: 4, not 9 (a peek answers what one more would leave: 5).
    const read = await (await node(() => now, { store: await liveStore(redis, { keyPrefix: prefix }) })).peek(key, HOURLY);
    expect([...answered(read), read.remaining]).toEqual([true, 'the store', 5]);
  });
});
