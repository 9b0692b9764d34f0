/**
 * The lean single-decision scripts (scripts/single.lua, one per algorithm): a decision alone in
 * its call, on Redis TIME, takes its algorithm's lean script instead of the batch script, and
 * decides exactly as the memory store does at the same `now` (each decision reports the Redis
 * time it was made at, so the memory store replays it step by step). The batch script's
 * decisions are pinned by the vectors; this holds the lean path to the same answers.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { compilePolicy, createLimiter, memoryStore, redisStore, type Decision, type Limiter, type Policy } from '../../../src/index.js';
import { LEAN_LIBRARY, SINGLE_SCRIPTS } from '../../../src/store/redis/lua.js';
import { useRedisServer } from '../../support/redis-topologies.js';

const server = useRedisServer();

const YEAR = 31_536_000_000;

describe('the lean scripts', () => {
  it('have pinned SHA1s (a changed script must change this test on purpose)', () => {
    expect(Object.fromEntries(Object.entries(SINGLE_SCRIPTS).map(([algorithm, script]) => [algorithm, script.sha1]))).toEqual({
      'fixed-window': '11f7e411761577992a854d5f28a1275b8c8ed49b',
      'sliding-window': '5cb154cb468bea22ac0ad0dc96f5bbf2bfe50cbb',
      'token-bucket': 'f4c1a65c415898aab53edce39b1d69477305931d',
      'leaky-bucket': 'cc21c80fa46eae99237f2c6a22d70bb9a669a25b',
      gcra: '55754a7785a8e2e2aaf72294062a036957df44d7',
    });
    // The lean library's name carries the hash of its source: a changed file changes it.
    expect(LEAN_LIBRARY.name).toBe('tollgate_912f04e4760c');
  });

  it('are what Redis computes for SCRIPT LOAD', () => {
    for (const script of Object.values(SINGLE_SCRIPTS)) expect(server.cli('SCRIPT', 'LOAD', script.source).trim()).toBe(script.sha1);
  });

  it('decide a lone decision on Redis TIME by FCALL of the lean library; an explicit now or a batch goes to the batch script', async () => {
    const store = redisStore({ url: server.url });
    await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const policy: Policy = { algorithm: 'gcra', limit: 10, window: 1_000 };
    const calls = (command: string): number => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(server.cli('INFO', 'commandstats'))?.[1] ?? 0);
    const exists = (sha1: string): string => server.cli('SCRIPT', 'EXISTS', sha1).trim();
    try {
      expect(server.cli('FUNCTION', 'LIST', 'LIBRARYNAME', LEAN_LIBRARY.name)).toContain(LEAN_LIBRARY.functions.gcra);
      server.cli('CONFIG', 'RESETSTAT');
      await limiter.limit('lone', policy);
      expect([calls('fcall'), calls('evalsha')]).toEqual([1, 0]);
      await limiter.limit('lone', policy, { now: Date.now() });
      await Promise.all([limiter.limit('a', policy), limiter.limit('b', policy)]);
      expect([calls('fcall'), calls('evalsha')]).toEqual([1, 2]);
      // After a flush the library is loaded again by the call that finds it missing.
      server.cli('FUNCTION', 'FLUSH');
      server.cli('SCRIPT', 'FLUSH');
      const afterFlush = await limiter.limit('lone', policy);
      expect([afterFlush.allowed, afterFlush.reason]).toEqual([true, undefined]);
      expect(server.cli('FUNCTION', 'LIST', 'LIBRARYNAME', LEAN_LIBRARY.name)).toContain(LEAN_LIBRARY.functions.gcra);
      expect(exists(SINGLE_SCRIPTS.gcra!.sha1)).toBe('0');
    } finally {
      await limiter.close();
    }
  });

  it.each([
    ['without FUNCTION (the library cannot be loaded)', '-function'],
    ['without FCALL', '-fcall'],
  ])('fall back to EVALSHA of the lean scripts for an ACL user %s', async (_name, denied) => {
    server.cli('ACL', 'SETUSER', 'limited', 'reset', 'on', '>secret', '~*', '+@all', denied);
    server.cli('FUNCTION', 'FLUSH');
    const limiter = createLimiter({ store: redisStore({ url: server.url, username: 'limited', password: 'secret' }), deadlineMs: 5_000 });
    const policy: Policy = { algorithm: 'fixed-window', limit: 3, window: 60_000 };
    const key = `acl:${Math.random().toString(36).slice(2)}`;
    try {
      server.cli('CONFIG', 'RESETSTAT');
      const decisions = [await limiter.limit(key, policy), await limiter.limit(key, policy)];
      expect(decisions.map((d) => [d.remaining, d.reason])).toEqual([
        [2, undefined],
        [1, undefined],
      ]);
      expect(server.cli('INFO', 'commandstats')).toMatch(/cmdstat_evalsha:calls=2,/);
    } finally {
      await limiter.close();
      server.cli('ACL', 'DELUSER', 'limited');
    }
  });

  it('fail loudly on bad arguments rather than writing NaN, by EVALSHA and by FCALL (a policy once accepted or not)', async () => {
    const client = new Redis(server.url);
    try {
      const key = 'tollgate:{bad}f1s';
      await client.function('LOAD', 'REPLACE', LEAN_LIBRARY.source);
      const byEval = (args: (string | number)[]) => client.eval(SINGLE_SCRIPTS['fixed-window']!.source, 1, key, ...args);
      const byFcall = (args: (string | number)[]) => client.fcall(LEAN_LIBRARY.functions['fixed-window']!, 1, key, ...args);
      for (const call of [byEval, byFcall]) {
        // ["window limit capacity nominal flags", op, cost]; a valid policy first, so FCALL holds it parsed.
        await expect(call(['1000 10 10 10 0', 2, 0])).resolves.toHaveLength(7);
        await expect(call(['1000 10 10 10 0', 1, 'NaN'])).rejects.toThrow(/argument 3 is not valid: NaN/);
        await expect(call(['1000 10 10 10 0', 1, 1.5])).rejects.toThrow(/argument 3 is not valid: 1.5/);
        await expect(call(['1000 10 10 10 0', 1, 0])).rejects.toThrow(/argument 3 is not valid: 0/);
        await expect(call(['1000 10 10 10 0', 3, 1])).rejects.toThrow(/argument 2 is not valid: 3/);
        await expect(call(['Infinity 10 10 10 0', 1, 1])).rejects.toThrow(/argument 1 is not valid: Infinity 10 10 10 0/);
        await expect(call(['1000 0 10 10 0', 1, 1])).rejects.toThrow(/argument 1 is not valid/);
        await expect(call(['1000 10 10 10 4', 1, 1])).rejects.toThrow(/argument 1 is not valid/);
        await expect(call(['1000 10 10 10', 1, 1])).rejects.toThrow(/argument 1 is not valid/);
        await expect(call(['1000 10 10 10 0 0', 1, 1])).rejects.toThrow(/argument 1 is not valid/);
        await expect(call(['1000  10 10 10 0', 1, 1])).rejects.toThrow(/argument 1 is not valid/);
        await expect(call(['1000 10 10 10 0', 1, 1, 'x'])).rejects.toThrow(/argument 4 is not valid: x/);
        await expect(call(['1000 10 10 10 0', 1])).rejects.toThrow(/out of range: 1 keys, 2 arguments/);
      }
      expect(await client.exists(key)).toBe(0);
    } finally {
      client.disconnect();
    }
  });

  it('keep deciding right past the parsed policies they hold (all emptied at 256), each algorithm with its own', async () => {
    const client = new Redis(server.url);
    try {
      await client.function('LOAD', 'REPLACE', LEAN_LIBRARY.source);
      // 300 policies, each on two algorithms whose texts are equal: every first hit admits and shows limit - 1.
      for (let limit = 1; limit <= 300; limit++) {
        for (const algorithm of ['fixed-window', 'token-bucket'] as const) {
          const reply = (await client.fcall(LEAN_LIBRARY.functions[algorithm]!, 1, `tollgate:{cache}${algorithm}${limit}`, `60000 ${limit} ${limit} ${limit} 0`, 1, 1)) as number[];
          expect(reply.slice(1, 3), `${algorithm} limit ${limit}`).toEqual([1, limit - 1]);
        }
      }
      // A policy met again after the emptying, with a cost that leaves it one.
      const again = (await client.fcall(LEAN_LIBRARY.functions['fixed-window']!, 1, 'tollgate:{cache}again', '60000 7 7 7 0', 1, 6)) as number[];
      expect(again.slice(1, 3)).toEqual([1, 1]);
    } finally {
      client.disconnect();
    }
  });
});

/** Short windows, so Redis time crosses many of them during a run; and wide policies. */
const POLICIES: readonly Policy[] = [
  { algorithm: 'fixed-window', limit: 5, window: 20 },
  { algorithm: 'fixed-window', limit: 5, window: 30, windowStart: 'first-hit' },
  { algorithm: 'fixed-window', limit: 3, window: 25, countRejected: true },
  { algorithm: 'sliding-window', limit: 6, window: 40 },
  { algorithm: 'token-bucket', limit: 7, window: 30, burst: 4 },
  { algorithm: 'leaky-bucket', limit: 9, window: 50, burst: 3 },
  { algorithm: 'gcra', limit: 10, window: 40, burst: 3 },
  { algorithm: 'gcra', limit: 5, window: 20, softPercent: 50 },
  { algorithm: 'token-bucket', limit: 4_294_967_295, window: YEAR, burst: 4_294_967_295 },
  { algorithm: 'leaky-bucket', limit: 3_000_000, window: YEAR, burst: 2_000_000 },
  { algorithm: 'gcra', limit: 7_000_000, window: YEAR, burst: 1_000_000 },
  { algorithm: 'sliding-window', limit: 1_000_000, window: YEAR },
];

describe('lone decisions on Redis TIME', () => {
  it.each(POLICIES.map((policy) => [JSON.stringify(policy), policy] as const))('%s decides as the memory store at the same now', async (_name, policy) => {
    const wide = compilePolicy(policy).wide;
    const steps = fc.sample(
      fc.record({
        peek: fc.boolean().map((peek) => peek && Math.random() < 0.4),
        cost: wide ? fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 50_000_000_000 })) : fc.integer({ min: 1, max: 3 }),
        pauseMs: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 12 })),
      }),
      { numRuns: 120, seed: 5 },
    );
    const store = redisStore({ url: server.url });
    await store.ready();
    // A deadline far above any call's time: on a loaded machine a missed default deadline would be
    // answered by the failure mode, which is not the store's answer.
    const onRedis = createLimiter({ store, deadlineMs: 5_000 });
    const onMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const key = `single:${policy.algorithm}:${Math.random().toString(36).slice(2)}`;
    const seen = { allowed: 0, denied: 0 };
    try {
      for (const [index, step] of steps.entries()) {
        // Only real time moves Redis TIME: the lean path has no explicit now to set.
        if (step.pauseMs > 0) await sleep(step.pauseMs);
        const options = { cost: step.cost };
        const actual: Decision = step.peek ? await onRedis.peek(key, policy, options) : await onRedis.limit(key, policy, options);
        const replay = { cost: step.cost, now: actual.now };
        const expected = step.peek ? await onMemory.peek(key, policy, replay) : await onMemory.limit(key, policy, replay);
        expect(actual, `step ${index}: ${JSON.stringify(step)}`).toEqual(expected);
        if (!step.peek) seen[actual.allowed ? 'allowed' : 'denied'] += 1;
      }
    } finally {
      await Promise.all([onRedis.close(), onMemory.close()]);
    }
    // The run saw both answers (how many of each depends on how fast real time ran past the steps).
    expect(seen.allowed).toBeGreaterThan(0);
    if (!wide) expect(seen.denied).toBeGreaterThan(0);
  });
});

/** Runs `work` with this process's clock (Date, so `currentTime()`) at `now`; timers stay real. */
async function at<T>(now: number, work: () => Promise<T>): Promise<T> {
  vi.useFakeTimers({ toFake: ['Date'], now });
  try {
    return await work();
  } finally {
    vi.useRealTimers();
  }
}

describe("lone decisions on the caller's clock (redisStore clock: 'caller')", () => {
  /** A limiter on its own store of the test server, on `clock`. */
  const onClock = async (clock: 'redis' | 'caller'): Promise<Limiter> => {
    const store = redisStore({ url: server.url, clock });
    await store.ready();
    return createLimiter({ store, deadlineMs: 5_000 });
  };
  /** How many `limiter` admits on `key` at `now` before its first denial. */
  const admittedAt = async (limiter: Limiter, key: string, policy: Policy, now: number): Promise<number> => {
    let admitted = 0;
    while ((await at(now, () => limiter.limit(key, policy))).allowed) admitted += 1;
    return admitted;
  };
  const calls = (command: string): number => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(server.cli('INFO', 'commandstats'))?.[1] ?? 0);

  it('refuse any clock but redis and caller, naming both', () => {
    expect(() => redisStore({ url: server.url, clock: 'node' as 'caller' })).toThrow(/clock must be 'redis' .* or 'caller'/);
  });

  it.each(POLICIES.slice(0, 8).map((policy) => [JSON.stringify(policy), policy] as const))(
    '%s decides as the memory store at the process clock, without TIME or PEXPIRETIME',
    async (_name, policy) => {
      // The process clock is driven (Date), not slept on: it crosses many windows in one run.
      const steps = fc.sample(fc.record({ peek: fc.boolean().map((peek) => peek && Math.random() < 0.4), cost: fc.integer({ min: 1, max: 3 }), advanceMs: fc.integer({ min: 0, max: 12 }) }), {
        numRuns: 120,
        seed: 7,
      });
      const store = redisStore({ url: server.url, clock: 'caller' });
      await store.ready();
      const onRedis = createLimiter({ store, deadlineMs: 5_000 });
      const onMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
      const key = `caller:${policy.algorithm}:${Math.random().toString(36).slice(2)}`;
      let now = Date.now();
      server.cli('CONFIG', 'RESETSTAT');
      try {
        for (const [index, step] of steps.entries()) {
          now += step.advanceMs;
          const actual = await at(now, () => (step.peek ? onRedis.peek(key, policy, { cost: step.cost }) : onRedis.limit(key, policy, { cost: step.cost })));
          expect(actual.now).toBe(now);
          const replay = { cost: step.cost, now };
          const expected = step.peek ? await onMemory.peek(key, policy, replay) : await onMemory.limit(key, policy, replay);
          expect(actual, `step ${index}: ${JSON.stringify(step)}`).toEqual(expected);
        }
      } finally {
        await Promise.all([onRedis.close(), onMemory.close()]);
      }
      expect([calls('fcall'), calls('time'), calls('pexpiretime')]).toEqual([steps.length, 0, 0]);
    },
  );

  it("move with a skewed process clock on 'caller', and not on 'redis'", async () => {
    const HOUR = 3_600_000;
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1h' };
    for (const clock of ['redis', 'caller'] as const) {
      const store = redisStore({ url: server.url, clock });
      await store.ready();
      const limiter = createLimiter({ store, deadlineMs: 5_000 });
      const key = `skew:${clock}:${Math.random().toString(36).slice(2)}`;
      try {
        await limiter.limit(key, policy);
        await limiter.limit(key, policy);
        const onTime = await limiter.limit(key, policy);
        expect(onTime.allowed).toBe(false);
        // This process's clock an hour ahead (the other nodes, and Redis, are not).
        const ahead = Date.now() + HOUR;
        const skewed = await at(ahead, () => limiter.limit(key, policy));
        if (clock === 'caller') {
          // Its own clock: the next window, fresh.
          expect([skewed.allowed, skewed.now, skewed.resetAt, skewed.remaining]).toEqual([true, ahead, onTime.resetAt + HOUR, 1]);
        } else {
          // Redis TIME: still the full window, whatever this process's clock says.
          expect([skewed.allowed, skewed.resetAt]).toEqual([false, onTime.resetAt]);
          expect(skewed.now - onTime.now).toBeLessThan(HOUR / 2);
        }
      } finally {
        await limiter.close();
      }
    }
  });

  it("gcra on 'caller': a node δ ahead admits at most ⌈δ × limit / window⌉ more than Redis time would, once", async () => {
    // 10 per second; node A drains the key at T, node B's clock is δ = 250 ms ahead at the same real instant.
    const policy: Policy = { algorithm: 'gcra', limit: 10, window: '1s' };
    const DELTA = 250;
    const bound = Math.ceil((DELTA * 10) / 1_000);
    const [a, b] = await Promise.all([onClock('caller'), onClock('caller')]);
    const key = `skew-gcra:${Math.random().toString(36).slice(2)}`;
    const T = Date.now();
    const drain = (limiter: Limiter, now: number): Promise<number> => admittedAt(limiter, key, policy, now);
    try {
      expect(await drain(a, T)).toBeGreaterThan(0);
      // On A's (= Redis's) clock nothing more is due at T.
      expect(await drain(a, T)).toBe(0);
      const extra = await drain(b, T + DELTA);
      expect(extra).toBeGreaterThan(0);
      expect(extra).toBeLessThanOrEqual(bound);
      // Once: the state now holds B's later time, and A, behind it, is refused.
      expect(await drain(a, T)).toBe(0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("fixed-window on 'caller': a node δ ahead opens the next window up to δ early, and a window still admits at most limit", async () => {
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1s' };
    const DELTA = 250;
    const [a, b] = await Promise.all([onClock('caller'), onClock('caller')]);
    const key = `skew-fw:${Math.random().toString(36).slice(2)}`;
    // 100 ms before a window's end on A's clock: B, δ ahead, is already 150 ms into the next one.
    const T = Math.ceil(Date.now() / 1_000) * 1_000 + 1_000 - 100;
    const count = (limiter: Limiter, now: number): Promise<number> => admittedAt(limiter, key, policy, now);
    try {
      expect(await count(a, T)).toBe(2);
      // B's next window opened δ − 100 ms early (real time is still in A's window): its limit, no more.
      expect(await count(b, T + DELTA)).toBe(2);
      // A, behind, counts in that later window: full.
      expect(await count(a, T)).toBe(0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("read keys written on Redis TIME, and write keys Redis TIME reads (switching a fleet's clock keeps every count)", async () => {
    const policies: Policy[] = [
      { algorithm: 'fixed-window', limit: 4, window: '1h' },
      { algorithm: 'gcra', limit: 4, window: '1h' },
      { algorithm: 'token-bucket', limit: 4, window: '1h' },
      { algorithm: 'sliding-window', limit: 4, window: '1h' },
    ];
    const [redisTime, callerClock] = await Promise.all([onClock('redis'), onClock('caller')]);
    try {
      for (const policy of policies) {
        for (const [first, second] of [
          [redisTime, callerClock],
          [callerClock, redisTime],
        ] as const) {
          const key = `switch:${policy.algorithm}:${Math.random().toString(36).slice(2)}`;
          const decisions = [await first.limit(key, policy), await first.limit(key, policy), await second.limit(key, policy), await second.limit(key, policy), await second.limit(key, policy)];
          expect(decisions.map((d) => d.allowed), policy.algorithm).toEqual([true, true, true, true, false]);
          expect(decisions.map((d) => d.remaining).slice(0, 4), policy.algorithm).toEqual([3, 2, 1, 0]);
        }
      }
    } finally {
      await Promise.all([redisTime.close(), callerClock.close()]);
    }
  });
});

describe("the cost of clock: 'caller' (docs/redis.md, Whose clock)", () => {
  /** Two nodes on one Redis, both on `clock: 'caller'`; `hit(node, at)` decides `key` with that node's clock at `at`. */
  async function twoNodes(work: (hit: (node: 0 | 1, at: number, policy: Policy, key: string) => Promise<boolean>) => Promise<void>): Promise<void> {
    const limiters = await Promise.all(
      [0, 1].map(async () => {
        const store = redisStore({ url: server.url, clock: 'caller' });
        await store.ready();
        return createLimiter({ store, deadlineMs: 5_000, overLimitCache: false });
      }),
    );
    try {
      await work(async (node, now, policy, key) => (await at(now, () => limiters[node]!.limit(key, policy))).allowed);
    } finally {
      await Promise.all(limiters.map((limiter) => limiter.close()));
    }
  }

  it('guarantee: clocks skewed by δ: a fixed window still admits at most limit, but opens up to δ early; gcra admits at most δ × limit / window more', async () => {
    const SKEW = 300; // node 1's clock runs 300 ms ahead of node 0's (real time)
    const fixed: Policy = { algorithm: 'fixed-window', limit: 3, window: 1_000 };
    const gcra: Policy = { algorithm: 'gcra', limit: 10, window: 1_000 };
    await twoNodes(async (hit) => {
      const key = `skew-bound:${Math.random().toString(36).slice(2)}`;
      // A window start in the near future, so the keys (kept 1 s past their end in real time) outlive the test's steps.
      const start = Math.ceil((Date.now() + 5_000) / 1_000) * 1_000;
      const admitted = async (node: 0 | 1, at: number, times: number): Promise<number> => {
        let count = 0;
        for (let i = 0; i < times; i++) if (await hit(node, at, fixed, key)) count++;
        return count;
      };
      // Real time start + 100: node 0 fills the window; node 1 (start + 400 by its clock) is in it too.
      expect(await admitted(0, start + 100, 5)).toBe(3);
      expect(await admitted(1, start + 100 + SKEW, 2)).toBe(0);
      // Real time start + 800: node 1's clock says start + 1,100, the next window: it opens 300 ms early...
      expect(await admitted(1, start + 800 + SKEW, 2)).toBe(2);
      // ...and node 0, still in the first window by its clock, counts in that later one: 3 in it, no more.
      expect(await admitted(0, start + 900, 5)).toBe(1);
      expect(await admitted(1, start + 1_900 + SKEW, 1)).toBe(1);

      // gcra, 10 per second: node 0 drains the burst at real time t; node 1, 300 ms ahead, finds
      // 300 ms of refill that real time has not given: exactly 3 requests more, then nothing.
      const bucket = `${key}:gcra`;
      const t = start + 100;
      let first = 0;
      while (await hit(0, t, gcra, bucket)) first++;
      expect(first).toBe(10);
      let extra = 0;
      for (let i = 0; i < 5; i++) if (await hit(1, t + SKEW, gcra, bucket)) extra++;
      expect(extra).toBe(3);
      expect(await hit(0, t, gcra, bucket)).toBe(false);
    });
  });
});
