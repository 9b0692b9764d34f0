/**
 * The stored layout of fixed-window, token-bucket, leaky-bucket and gcra (layout 2,
 * src/store/redis/scripts/layout.lua), on a real single Redis and a real 3-master Cluster: key
 * names, one integer per key expiring exactly at the end of its state, the "v end" form an explicit
 * `now` writes, keys of the previous layout never read, a value without its expiry refused; and
 * batches decided on Redis TIME (the batch script writing this layout) against the memory store;
 * lone decisions by FCALL of the lean library on every master.
 * The lean path is held to the memory store by test/store/redis/single.test.ts, the explicit-`now`
 * form by the vectors.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, memoryStore, type Decision, type Policy, type RedisStore } from '../../../src/index.js';
import { LEAN_LIBRARY } from '../../../src/store/redis/lua.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';
import type { RedisServer } from '../../support/redis.js';

const redis = useRedisTopologies();

/**
 * What a node of the previous version ran for an aligned fixed-window decision of cost 1 (layout 1,
 * cb8d486^ scripts/fixed-window.lua reduced to that case): the state "count index" under
 * `<prefix>{key}:fw:<window>`, a new window starting from 0. Returns 1 when admitted.
 */
const LAYOUT_1_FIXED_WINDOW = `
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local index = math.floor(now / window)
local count = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local c, i = string.match(stored, '^(%d+) (%d+)$')
  if tonumber(i) == index then count = tonumber(c) end
end
if count + 1 > limit then return 0 end
redis.call('SET', KEYS[1], (count + 1) .. ' ' .. index, 'PX', (index + 1) * window - now + 1000)
return 1`;

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}`;
}

const FIXED: Policy = { algorithm: 'fixed-window', limit: 3, window: '1m' };
const GCRA: Policy = { algorithm: 'gcra', limit: 3, window: '1s' };
const TOKEN_BUCKET: Policy = { algorithm: 'token-bucket', limit: 7, window: '1s', burst: 4 };

/** The server holding `key`: the single Redis, or the Cluster master that owns its slot. */
function serverOf(key: string, servers: readonly RedisServer[]): RedisServer {
  return servers.find((server) => server.cli('EXISTS', key).trim() === '1') ?? servers[0]!;
}

describe('layout 2 key names', () => {
  it('put a short tag right after the hash tag; sliding windows and logs keep layout 1', async () => {
    const store = await redis.open({ url: redis.single.url });
    const name = (policy: Policy): string => store.redisKey('user:42', compilePolicy(policy));
    expect(name(FIXED)).toBe('tollgate:{user:42}f1m');
    expect(name({ ...FIXED, windowStart: 'first-hit' })).toBe('tollgate:{user:42}fh1m');
    expect(name(TOKEN_BUCKET)).toBe('tollgate:{user:42}t1s');
    expect(name({ algorithm: 'leaky-bucket', limit: 5, window: '90s' })).toBe('tollgate:{user:42}l90s');
    expect(name(GCRA)).toBe('tollgate:{user:42}g1s');
    expect(name({ algorithm: 'sliding-window', limit: 5, window: '1m' })).toBe('tollgate:{user:42}:sw:1m');
    expect(name({ algorithm: 'sliding-log', limit: 5, window: '1m' })).toBe('tollgate:{user:42}:sl:1m');
  });
});

describe.each([
  ['single Redis', () => redis.open({ url: redis.single.url }), () => [redis.single]],
  ['Redis Cluster', () => redis.open({ cluster: redis.cluster.nodes }), () => redis.cluster.servers],
] as const)('layout 2 values on %s', (_name, open: () => Promise<RedisStore>, servers: () => readonly RedisServer[]) => {
  it('on Redis TIME: one integer, integer-encoded, the key expiring at the state\'s end (the decision\'s resetAt)', async () => {
    const store = await open();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    // Policies whose keys live for minutes: read back by redis-cli on a busy machine, a key of GCRA's
    // 1 s (it expires in a third of a second) may be gone already.
    for (const policy of [FIXED, { ...GCRA, window: '1h' }, { ...TOKEN_BUCKET, window: '1h' }, { ...FIXED, windowStart: 'first-hit' } as Policy]) {
      let key = unique('compact');
      let decision: Decision | undefined;
      // Two in one tick (the batch script), then one alone (the lean script), in one window: a
      // loaded machine may cross the minute between them (the count then starts again at 1).
      for (let attempt = 0; attempt < 3 && decision === undefined; attempt++) {
        key = unique('compact');
        const [first] = await Promise.all([limiter.limit(key, policy), limiter.limit(unique('other'), policy)]);
        const second = await limiter.limit(key, policy);
        if (policy.algorithm !== 'fixed-window' || second.resetAt === first.resetAt) decision = second;
      }
      if (decision === undefined) throw new Error('three attempts crossed a window');
      const name = store.redisKey(key, compilePolicy(policy));
      const server = serverOf(name, servers());
      const value = server.cli('GET', name).trim();
      expect(value, policy.algorithm).toMatch(/^\d+$/);
      if (policy.algorithm === 'fixed-window') expect(value).toBe('2');
      expect(server.cli('OBJECT', 'ENCODING', name).trim()).toBe('int');
      expect(Number(server.cli('PEXPIRETIME', name).trim()), policy.algorithm).toBe(decision.resetAt);
    }
    // A lone decision on every master (keys land on masters by their slot: add some until each has had one).
    const hadOne = new Set<RedisServer>();
    for (let i = 0; i < 200 && hadOne.size < servers().length; i++) {
      const key = unique('lone');
      await limiter.limit(key, FIXED); // a minute's window: the key is still there to be found
      hadOne.add(serverOf(store.redisKey(key, compilePolicy(FIXED)), servers()));
    }
    // The lone decisions went through the lean library, loaded on every master.
    for (const server of servers()) {
      expect(server.cli('FUNCTION', 'LIST', 'LIBRARYNAME', LEAN_LIBRARY.name)).toContain(LEAN_LIBRARY.functions.gcra);
      expect(server.cli('INFO', 'commandstats')).toMatch(/cmdstat_fcall:calls=[1-9]/);
    }
  });

  it('with an explicit now: the string "v end", kept past its end in real time', async () => {
    const store = await open();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const now = Date.now() - 10_000;
    const key = unique('explicit');
    const decidedFrom = Date.now(); // the key's real-time expiry counts from the decision, however late the checks below run
    const decision = await limiter.limit(key, GCRA, { now });
    const name = store.redisKey(key, compilePolicy(GCRA));
    const server = serverOf(name, servers());
    // gcra 3 per second: TAT = now + 333 1/3 ms, so the remainder is 1 (in thirds of a ms) and the end now + 334.
    expect(server.cli('GET', name).trim()).toBe(`1 ${now + 334}`);
    expect(decision.resetAt).toBe(now + 334);
    expect(Number(server.cli('PEXPIRETIME', name).trim())).toBeGreaterThan(decidedFrom + 10_000);
  });
});

describe('keys of the previous layout and foreign values', () => {
  it('a layout-1 key is never read: a new node starts that counter from zero and leaves the old key to expire', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const key = unique('upgrade');
    const oldName = `tollgate:{${key}}:fw:1m`;
    const index = Math.floor(Date.now() / 60_000);
    redis.single.cli('SET', oldName, `3 ${index}`, 'PX', '60000');
    const decision = await limiter.limit(key, FIXED);
    expect(decision).toMatchObject({ allowed: true, remaining: 2 });
    expect(redis.single.cli('GET', oldName).trim()).toBe(`3 ${index}`);
  });

  it('rolling upgrade: an old (layout-1) node and a new node deciding one key at once admit at most the limit each, twice the limit in all', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const old = new Redis(redis.single.url);
    try {
      const policy: Policy = { algorithm: 'fixed-window', limit: 50, window: '1h' };
      const key = unique('rolling');
      const now = 1_700_000_000_000;
      // The previous version's fixed-window decision (its scripts/fixed-window.lua, aligned, cost 1):
      // state "count index" under the layout-1 name, counted atomically by Redis.
      const oldDecision = (): Promise<unknown> => old.eval(LAYOUT_1_FIXED_WINDOW, 1, `tollgate:{${key}}:fw:1h`, now, 3_600_000, policy.limit);
      const calls = Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? oldDecision().then((admitted) => ['old', admitted === 1] as const) : limiter.limit(key, policy, { now }).then((d) => ['new', d.allowed] as const)));
      const answers = await Promise.all(calls);
      const admitted = (node: string): number => answers.filter(([by, allowed]) => by === node && allowed).length;
      expect([admitted('old'), admitted('new')]).toEqual([50, 50]);
      // Each layout's nodes are exact among themselves: neither counter holds the other's units.
      expect(redis.single.cli('GET', `tollgate:{${key}}:fw:1h`).trim()).toBe(`50 ${Math.floor(now / 3_600_000)}`);
      expect((await limiter.look(key, policy, { now })).remaining).toBe(0);
    } finally {
      old.disconnect();
    }
  });

  it('an integer without an expiry is unreadable state: a typed error, the key left unchanged', async () => {
    const store = await redis.open({ url: redis.single.url });
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    for (const policy of [FIXED, GCRA, TOKEN_BUCKET]) {
      const key = unique('persisted');
      const name = store.redisKey(key, compilePolicy(policy));
      redis.single.cli('SET', name, '5');
      await expect(limiter.limit(key, policy)).rejects.toThrow(/holds state Tollgate cannot read/);
      await expect(Promise.all([limiter.limit(key, policy), limiter.limit(unique('x'), policy)])).rejects.toThrow(/cannot read/);
      expect(redis.single.cli('GET', name).trim()).toBe('5');
      expect(redis.single.cli('PTTL', name).trim()).toBe('-1');
    }
  });
});

/** Short windows, so Redis time crosses many of them during a run. */
const BATCHED: readonly Policy[] = [
  { algorithm: 'fixed-window', limit: 5, window: 20 },
  { algorithm: 'fixed-window', limit: 5, window: 30, windowStart: 'first-hit' },
  { algorithm: 'fixed-window', limit: 3, window: 25, countRejected: true },
  { algorithm: 'token-bucket', limit: 7, window: 30, burst: 4 },
  { algorithm: 'leaky-bucket', limit: 9, window: 50, burst: 3 },
  { algorithm: 'gcra', limit: 10, window: 40, burst: 3 },
  { algorithm: 'gcra', limit: 5, window: 20, softPercent: 50 },
  { algorithm: 'gcra', limit: 7_000_000, window: 31_536_000_000, burst: 1_000_000 },
];

describe('batches on Redis TIME (the batch script writing layout 2)', () => {
  it.each(BATCHED.map((policy) => [JSON.stringify(policy), policy] as const))('%s decides as the memory store at the same now', async (_name, policy) => {
    const wide = compilePolicy(policy).wide;
    const steps = fc.sample(
      fc.record({
        peek: fc.boolean().map((peek) => peek && Math.random() < 0.3),
        cost: wide ? fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 50_000_000_000 })) : fc.integer({ min: 1, max: 3 }),
        pauseMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 12 })),
        // Calls on the key in one tick, so decided at one Redis TIME: a busy machine's slow round
        // trips alone would cross a window between any two calls and never meet a denial.
        burst: fc.integer({ min: 1, max: 4 }),
      }),
      { numRuns: 100, seed: 9 },
    );
    // A deadline far above any call's time: a missed default deadline would be answered by the failure mode.
    const onRedis = createLimiter({ store: await redis.open({ url: redis.single.url }), deadlineMs: 5_000 });
    const onMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const key = unique(`batched:${policy.algorithm}`);
    const seen = { allowed: 0, denied: 0 };
    try {
      for (const [index, step] of steps.entries()) {
        if (step.pauseMs > 0) await sleep(step.pauseMs);
        const options = { cost: step.cost };
        // A second key in the same tick makes it a batch of two: decide.lua, not the lean script.
        const decided = await Promise.all([
          ...Array.from({ length: step.burst }, () => (step.peek ? onRedis.peek(key, policy, options) : onRedis.limit(key, policy, options))),
          onRedis.limit(unique('company'), policy),
        ]);
        for (const [call, actual] of decided.slice(0, step.burst).entries()) {
          const replay = { cost: step.cost, now: actual.now };
          const expected: Decision = step.peek ? await onMemory.peek(key, policy, replay) : await onMemory.limit(key, policy, replay);
          expect(actual, `step ${index}, call ${call}: ${JSON.stringify(step)}`).toEqual(expected);
          if (!step.peek) seen[actual.allowed ? 'allowed' : 'denied'] += 1;
        }
      }
    } finally {
      await onMemory.close();
    }
    expect(seen.allowed).toBeGreaterThan(5);
    if (!wide) expect(seen.denied).toBeGreaterThan(5);
  });
});
