/**
 * Token leases on a real Redis: a node takes `lease` units in one store call and admits from them
 * locally. Never over the limit, across several nodes on a bursty trace (counted against the
 * exact mode on the same trace); at most nodes × (lease − 1) units of under-admission per window;
 * store calls divided by about the lease size; off where it must be.
 */
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, createLimiter, memoryStore, redisStore, type Decision, type Policy, type Store } from '../../src/index.js';
import { compileRules, parseRules } from '../../src/rules/index.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { burstyTrace } from '../support/traces.js';

const redis = useRedisServer();
const { stores } = redis;

/** A limiter on its own connection: one "node". */
async function node() {
  const store = redisStore({ url: redis.url });
  stores.push(store);
  await store.ready();
  return createLimiter({ store, deadlineMs: 5_000 });
}

const scriptCalls = (): number => Number(/cmdstat_evalsha:calls=(\d+)/.exec(redis.cli('INFO', 'commandstats'))?.[1] ?? 0);
const T0 = 1_700_000_000_000;
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;


describe('token leases', () => {
  it('one node: exactly the limit, in about limit / lease store calls', async () => {
    const limiter = await node();
    const policy: Policy = { algorithm: 'fixed-window', limit: 100, window: '1h' };
    const key = unique('one');
    redis.cli('CONFIG', 'RESETSTAT');
    const decisions = [];
    for (let i = 0; i < 120; i++) decisions.push(await limiter.limit(key, policy, { lease: 10, now: 1_700_000_000_000 + i }));
    const calls = scriptCalls();
    expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
    expect(decisions.slice(0, 100).map((d) => d.remaining)).toEqual(Array.from({ length: 100 }, (_, i) => 99 - i));
    console.log(`[leases] one node, limit 100, lease 10: ${calls} script calls for 120 decisions`);
    expect(calls).toBeLessThanOrEqual(10 + 2 * 20);
  });

  it.each(['fixed-window', 'sliding-window'] as const)(
    '%s: three nodes on a bursty trace never admit more than the exact mode, and at most 3 × (lease − 1) fewer',
    async (algorithm) => {
      const nodes = [await node(), await node(), await node()];
      const policy: Policy = { algorithm, limit: 300, window: 60_000 };
      const trace = burstyTrace(400, 7);
      const leased = unique('leased');
      const exact = unique('exact');
      redis.cli('CONFIG', 'RESETSTAT');
      let admittedLeased = 0;
      for (const { at, node: n } of trace) if ((await nodes[n]!.limit(leased, policy, { lease: 5, now: T0 + at })).allowed) admittedLeased += 1;
      const leasedCalls = scriptCalls();
      redis.cli('CONFIG', 'RESETSTAT');
      let admittedExact = 0;
      for (const { at, node: n } of trace) if ((await nodes[n]!.limit(exact, policy, { now: T0 + at })).allowed) admittedExact += 1;
      const exactCalls = scriptCalls();
      console.log(`[leases] ${algorithm}, 3 nodes, limit 300, lease 5, 400 bursty requests: admitted ${admittedLeased} leased vs ${admittedExact} exact; script calls ${leasedCalls} vs ${exactCalls}`);
      expect(admittedLeased).toBeLessThanOrEqual(admittedExact);
      expect(admittedLeased).toBeGreaterThanOrEqual(admittedExact - 3 * (5 - 1));
      expect(leasedCalls).toBeLessThan(exactCalls);
    },
  );

  it.each([
    ['Redis', 1],
    ['Redis', 3],
    // The memory store decides in-process, so a lease is recorded before the next call: the same figures.
    ['memory store', 1],
  ] as const)(
    'concurrent calls keep every permit taken (issue 26, item 2): %s, %d node(s), 20 calls at once on each, then 40 one by one, admit the exact mode\'s 50 less at most nodes × (lease − 1)',
    async (on, count) => {
      const nodes = on === 'Redis' ? await Promise.all(Array.from({ length: count }, () => node())) : [createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) })];
      const policy: Policy = { algorithm: 'fixed-window', limit: 50, window: '1h' };
      const run = async (key: string, options: { lease?: number }): Promise<Decision[]> => {
        const burst = nodes.flatMap((limiter) => Array.from({ length: 20 }, (_, i) => limiter.limit(key, policy, { ...options, now: T0 + i })));
        const decisions = await Promise.all(burst);
        for (let i = 0; i < 40; i++) decisions.push(await nodes[i % count]!.limit(key, policy, { ...options, now: T0 + 100 + i }));
        return decisions;
      };
      const exact = (await run(unique('exact'), {})).filter((d) => d.allowed).length;
      const leased = await run(unique('concurrent'), { lease: 10 });
      const admitted = leased.filter((d) => d.allowed);
      console.log(`[leases] fixed-window, limit 50, lease 10, ${on}, ${count} node(s), 20 concurrent calls each then 40: admitted ${admitted.length} leased vs ${exact} exact`);
      expect(exact).toBe(50);
      expect(admitted.length).toBeLessThanOrEqual(exact);
      expect(admitted.length).toBeGreaterThanOrEqual(exact - count * (10 - 1));
      if (count === 1) {
        // One node keeps every permit: each admitted request is told a different remaining, 49 down to 0.
        expect(admitted.map((d) => d.remaining).sort((a, b) => b - a)).toEqual(Array.from({ length: 50 }, (_, i) => 49 - i));
      }
    },
  );

  it('calls waiting for a lease the store could not answer are decided alone, at once, not one lease after another (issue 26, item 2)', async () => {
    // A store whose calls never settle: each is answered by the failure mode at its 30 ms deadline.
    const calledAt: number[] = [];
    const hung = memoryStore({ sweepIntervalMs: 0 });
    const store: Store = {
      name: 'hung',
      consume: () => {
        calledAt.push(performance.now());
        return new Promise<Decision>(() => undefined);
      },
      peek: (key, policy, cost, now) => hung.peek(key, policy, cost, now),
      consumeAll: (requests, now, commit) => hung.consumeAll(requests, now, commit),
      reset: (key, policy) => hung.reset(key, policy),
      resetPrefix: (prefix) => hung.resetPrefix(prefix),
      close: () => hung.close(),
    };
    const limiter = createLimiter({ store, deadlineMs: 30, breaker: false, failureMode: 'closed' });
    const policy: Policy = { algorithm: 'fixed-window', limit: 50, window: '1h' };
    const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k', policy, { lease: 10, now: T0 })));
    expect(decisions.map((d) => d.reason)).toEqual(Array<string>(10).fill('fail-closed'));
    // The lease, then the nine waiting calls together once its deadline passed: not one lease
    // after another, a deadline apart.
    expect(calledAt).toHaveLength(10);
    expect(calledAt[1]! - calledAt[0]!).toBeGreaterThanOrEqual(29);
    expect(calledAt[9]! - calledAt[1]!).toBeLessThan(29);
  });

  it('rules: lease_size on a rate_limit leases for checks of that limit alone', async () => {
    const rules = compileRules(parseRules('domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 40, lease_size: 8 }\n', 'rules.yaml'));
    const nodes = await Promise.all([0, 1, 2].map(async () => {
      const store = redisStore({ url: redis.url });
      stores.push(store);
      await store.ready();
      return createLimiter({ store, deadlineMs: 5_000, rules: { current: rules } as never });
    }));
    const value = unique('u');
    redis.cli('CONFIG', 'RESETSTAT');
    let admitted = 0;
    for (let i = 0; i < 60; i++) {
      const result = await nodes[i % 3]!.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value }] }] });
      if (result.overallCode === 'OK') admitted += 1;
    }
    const calls = scriptCalls();
    console.log(`[leases] rules, 3 nodes, 40 an hour, lease_size 8: admitted ${admitted} of 60 in ${calls} script calls`);
    expect(admitted).toBeLessThanOrEqual(40);
    expect(admitted).toBeGreaterThanOrEqual(40 - 3 * 7);
    expect(calls).toBeLessThan(60);
  });

  it('refuses a lease where it cannot keep the algorithm\'s caps (token-bucket, GCRA, sliding-log, leaky-bucket, countRejected), on every entry point, naming the alternative', async () => {
    const limiter = await node();
    const refused: Policy[] = [
      { algorithm: 'token-bucket', limit: 10, window: '1s' },
      { algorithm: 'gcra', limit: 10, window: '1s' },
      { algorithm: 'sliding-log', limit: 10, window: '1s' },
      { algorithm: 'leaky-bucket', limit: 10, window: '1s' },
      { algorithm: 'fixed-window', limit: 10, window: '1s', countRejected: true },
    ];
    for (const policy of refused) {
      const key = unique('refused');
      await expect(limiter.limit(key, policy, { lease: 10, now: T0 })).rejects.toThrow(InvalidOptionError);
      await expect(limiter.limitAll([{ key, policy, lease: 10 }], { now: T0 })).rejects.toThrow(/a lease (keeps the caps of fixed-window and sliding-window only|cannot keep a countRejected policy)/);
      // Nothing was counted by the refused calls.
      expect(await limiter.look(key, policy, { now: T0 })).toMatchObject({ remaining: 10 });
    }
    await expect(limiter.limit('k', refused[0]!, { lease: 10 })).rejects.toThrow(/use a fixed-window or sliding-window policy with the lease/);
    expect(() => compileRules(parseRules('domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 10, algorithm: token-bucket, lease_size: 5 }\n', 'rules.yaml'))).toThrow(/rules\.yaml:4:\d+.*lease_size keeps the caps of algorithm fixed-window and sliding-window only, not token-bucket/s);
    await expect(limiter.limit('k', { algorithm: 'fixed-window', limit: 3, window: '1h' }, { lease: 1 })).rejects.toThrow(InvalidOptionError);
    await expect(limiter.limit('k', { algorithm: 'fixed-window', limit: 3, window: '1h' }, { lease: 2.5 })).rejects.toThrow(/lease must be a whole number of units from 2/);
  });

  it('leased permits lapse with the window they were counted in: 10 a second, lease 10, a call at 990 then bursts at 1010 and 1980 admit in [1000, 2000) what the exact mode admits (19 when permits outlived their window)', async () => {
    for (const algorithm of ['fixed-window', 'sliding-window'] as const) {
      const limiter = await node();
      const policy: Policy = { algorithm, limit: 10, window: '1s' };
      const admittedIn = async (key: string, lease: number | undefined): Promise<number> => {
        const at = (now: number) => limiter.limit(key, policy, { now: T0 + now, ...(lease === undefined ? {} : { lease }) });
        await at(990);
        let admitted = 0;
        for (const now of [1010, 1980]) for (let i = 0; i < 15; i++) if ((await at(now)).allowed) admitted += 1;
        return admitted;
      };
      // T0 is a whole second: 1000 starts a window.
      expect(T0 % 1000).toBe(0);
      const exact = await admittedIn(unique('exact'), undefined);
      const leased = await admittedIn(unique('leased'), 10);
      console.log(`[leases] ${algorithm}, 10/s, lease 10, calls at 990, 1010, 1980: admitted in [1000, 2000) ${leased} leased vs ${exact} exact`);
      expect(exact).toBe(10);
      expect(leased).toBeLessThanOrEqual(exact);
      expect(leased).toBeGreaterThanOrEqual(exact - (10 - 1));
    }
  });
});
