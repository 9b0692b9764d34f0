/**
 * Cross-slot calls on a real 3-master Redis Cluster (src/store/redis/cross-slot.ts, G-REDIS-13):
 * the decisions of one tick bound for one master are decided by one FCALL on it, whatever their
 * hash slots; decisions stay exact across processes; a group whose slot is being migrated is left
 * out by the script before anything is written and decided once, through the per-slot path.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/algorithms/catalog.js';
import { compilePolicy, createLimiter, memoryStore, redisStore, type Decision, type Policy, type RedisStore } from '../../../src/index.js';
import { cliAsync } from '../../support/redis.js';
import { clusterNodes, keyInSlot, slotOwner } from '../../support/redis-failover.js';
import { useRedisCluster, useRedisTopologies } from '../../support/redis-topologies.js';

const runWorker = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const run = Math.random().toString(36).slice(2, 8);
/** A store error is the test's failure, never a failure mode's answer. */
const RAW = { failureMode: 'throw', breaker: false, deadlineMs: 20_000 } as const;
/** Every call admitted: a key's count is readable back as limit − remaining. */
const counting: Policy = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1h', windowStart: 'first-hit' };

/** Script calls (FCALL, and EVALSHA or EVAL) made on the servers on `ports` so far, from INFO commandstats. */
async function scriptCalls(ports: readonly number[]): Promise<{ fcall: number; evalsha: number }> {
  const stats = await Promise.all(ports.map((port) => cliAsync(port, 'INFO', 'commandstats')));
  const count = (name: string): number => stats.reduce((total, text) => total + Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(text)?.[1] ?? 0), 0);
  return { fcall: count('fcall'), evalsha: count('evalsha') + count('eval') };
}

/** The port serving each key in the store's slot table. */
function masterPorts(store: RedisStore, keys: readonly string[]): number[] {
  const slots = (store.client as unknown as { slots: string[][] }).slots;
  // The hash tag is the caller's key (no braces here), so its slot is the key's.
  return keys.map((key) => Number(slots[calculateSlot(key)]![0]!.split(':')[1]));
}

describe('spread keys on a 3-master Cluster', () => {
  const redis = useRedisTopologies();

  it("one tick's decisions bound for one master are one call on it, whatever their slots; maxBatch splits a master's call", async () => {
    const ports = redis.cluster.servers.map((server) => server.port);
    const keys = Array.from({ length: 150 }, (_, index) => `spread:${index}`);
    const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: '1h' };
    for (const [maxBatch, round] of [
      [1_000, 1],
      [10, 2],
    ] as const) {
      const store = await redis.open({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000, maxBatch });
      const limiter = createLimiter({ store, ...RAW });
      const perMaster = new Map<number, number>();
      for (const port of masterPorts(store, keys)) perMaster.set(port, (perMaster.get(port) ?? 0) + 1);
      const before = await scriptCalls(ports);
      const decisions = await Promise.all(keys.map((key) => limiter.limit(key, policy)));
      const after = await scriptCalls(ports);
      expect(decisions.map((decision) => [decision.allowed, decision.remaining])).toEqual(keys.map(() => [true, 5 - round]));
      // 150 keys in ~150 slots: per slot this was ~150 calls; now one per master (per maxBatch groups).
      expect(new Set(keys.map((key) => calculateSlot(key))).size).toBeGreaterThan(140);
      expect(perMaster.size).toBe(3);
      expect(after.fcall - before.fcall).toBe([...perMaster.values()].reduce((total, count) => total + Math.ceil(count / maxBatch), 0));
      expect(after.evalsha - before.evalsha).toBe(0);
    }
  }, 60_000);

  it("a Cluster client given with an ioredis keyPrefix: decided per slot, so every key carries the prefix", async () => {
    const client = new Cluster(redis.cluster.nodes.map(({ host, port }) => ({ host, port })), { keyPrefix: 'app:' });
    const plain = new Cluster(redis.cluster.nodes.map(({ host, port }) => ({ host, port })));
    try {
      const store = await redis.open({ client, commandTimeoutMs: 20_000 });
      const limiter = createLimiter({ store, ...RAW });
      const keys = Array.from({ length: 60 }, (_, index) => `${run}:prefixed:${index}`);
      await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      const second = await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      expect(second.map((decision) => decision.remaining)).toEqual(keys.map(() => counting.limit - 2));
      const stored = await Promise.all(keys.map((key) => plain.exists(`app:${store.redisKey(key, compilePolicy(counting))}`)));
      expect(stored).toEqual(keys.map(() => 1));
    } finally {
      client.disconnect();
      plain.disconnect();
    }
  }, 60_000);

  it('spread keys hammered by 3 processes: every key admits exactly its limit, in far fewer calls than decisions', async () => {
    const ports = redis.cluster.servers.map((server) => server.port);
    const limit = 100;
    const attemptsPerProcess = 90;
    // 4 keys per algorithm, 24 keys in 24 slots spread over the 3 masters, all hammered at once.
    const jobs = ALGORITHMS.flatMap((algorithm) => Array.from({ length: 4 }, (_, index) => ({ policy: { algorithm, limit, window: '1d' }, key: `${run}:hammer:${algorithm}:${index}` })));
    const before = await scriptCalls(ports);
    const outputs = await Promise.all(
      Array.from({ length: 3 }, () =>
        runWorker(process.execPath, [WORKER, JSON.stringify({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 }), JSON.stringify(jobs), String(attemptsPerProcess), '2', JSON.stringify({ failureMode: 'throw' })]),
      ),
    );
    const after = await scriptCalls(ports);
    const tallies = outputs.map(({ stdout }) => JSON.parse(stdout) as { admitted: number; failed: number }[]);
    const admitted = jobs.map((_, job) => tallies.reduce((total, tally) => total + tally[job]!.admitted, 0));
    const failed = tallies.flat().reduce((total, tally) => total + tally.failed, 0);
    expect(failed).toBe(0);
    expect(admitted).toEqual(jobs.map(() => limit));
    // 2 callers per key and process: per slot, about one call per 2 decisions; across slots, one per master per tick.
    const decisions = jobs.length * attemptsPerProcess * 3;
    const calls = after.fcall + after.evalsha - before.fcall - before.evalsha;
    expect(calls).toBeLessThan(decisions / 5);
  }, 120_000);
});

describe("one tick's calls for one key, in the order they were made", () => {
  const redis = useRedisTopologies();
  const T0 = 1_800_000_000_000;

  it("calls with different `now`s in one tick: a lone one (per slot) is not overtaken by the master's cross-slot call made after it", async () => {
    const store = await redis.open({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 });
    const limiter = createLimiter({ store, ...RAW });
    const policy: Policy = { algorithm: 'fixed-window', limit: 2, window: '1h' };
    const key = `${run}:order`;
    // One tick: T0 alone in its call, then two at T0 + 1 (a call of two groups on the key's master).
    const decisions = await Promise.all([T0, T0 + 1, T0 + 1].map((now) => limiter.limit(key, policy, { now })));
    // Before the fix, the call at T0 + 1 went first and took both units: [false, true, true].
    expect(decisions.map((decision) => decision.allowed)).toEqual([true, true, false]);
  }, 60_000);

  it('local-first, one limiter, sliding-window 10 per 1 s (model seed 2131586736): the units a stale view held are counted before the store decides, so the window admits 10, not 11', async () => {
    const store = await redis.open({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 });
    const limiter = createLimiter({ store, ...RAW });
    const policy: Policy = { algorithm: 'sliding-window', limit: 10, window: 1_000 };
    const key = `${run}:local-first`;
    let admitted = 0;
    // [ms after the previous step, calls at once]: the view goes stale at T0 + 601 holding the unit admitted at T0 + 1.
    for (const [at, count] of [[0, 1], [1, 1], [601, 1], [601, 3], [602, 5]] as const) {
      const decisions = await Promise.all(Array.from({ length: count }, () => limiter.limit(key, policy, { now: T0 + at, syncIntervalMs: 200 })));
      admitted += decisions.filter((decision) => decision.allowed).length;
      // Every sync answered before the next step (the model's `settled`).
      while (limiter.health().inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    // Closed here: its views' timer would push their last units during the next test.
    await limiter.close();
    expect(admitted).toBe(10);
  }, 60_000);
});

describe('every algorithm through the cross-slot call', () => {
  const redis = useRedisTopologies();

  it('decides as the memory store, step by step, when each tick holds keys of many slots on each master', async () => {
    const ports = redis.cluster.servers.map((server) => server.port);
    const store = await redis.open({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 });
    const onCluster = createLimiter({ store, ...RAW });
    const inMemory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policies: Policy[] = [
      ...ALGORITHMS.map((algorithm) => ({ algorithm, limit: 5, window: '10s' }) as Policy),
      { algorithm: 'sliding-window', limit: 5, window: '10s', precision: 10 },
      { algorithm: 'fixed-window', limit: 5, window: '10s', windowStart: 'first-hit' },
      { algorithm: 'sliding-log', limit: 5, window: '10s', countRejected: true },
      { algorithm: 'gcra', limit: 5, window: '10s', blockDuration: '30s' },
    ];
    // 12 keys per policy: each tick holds ~36 keys per master, in as many slots.
    const jobs = policies.flatMap((policy, p) => Array.from({ length: 12 }, (_, k) => ({ policy, key: `${run}:vector:${p}:${k}` })));
    const fields = (decision: Decision): unknown[] => [decision.allowed, decision.remaining, decision.resetAt, decision.retryAfter, decision.delay, decision.reason];
    const before = await scriptCalls(ports);
    let now = 1_800_000_000_000;
    for (let step = 0; step < 16; step++) {
      now += 250 + 900 * (step % 3);
      const options = (index: number) => ({ now, cost: ((index + step) % 3) + 1 });
      const expected = await Promise.all(jobs.map(({ key, policy }, index) => inMemory.limit(key, policy, options(index))));
      const actual = await Promise.all(jobs.map(({ key, policy }, index) => onCluster.limit(key, policy, options(index))));
      expect({ step, decisions: actual.map(fields) }).toEqual({ step, decisions: expected.map(fields) });
    }
    const after = await scriptCalls(ports);
    // An explicit `now` is never a lean call: per slot this would be EVALSHA, one per key and step.
    expect(after.evalsha - before.evalsha).toBe(0);
    expect(after.fcall - before.fcall).toBeLessThanOrEqual(16 * 3 * Math.ceil(jobs.length / 64 + 1));
  }, 60_000);
});

describe('a slot being migrated between masters (MIGRATING on the source, IMPORTING on the target)', () => {
  const cluster = useRedisCluster(3);

  it('a group of that slot is left out of the cross-slot call before anything is written, and decided once through the per-slot path', async () => {
    const store = redisStore({ cluster: cluster.nodes, commandTimeoutMs: 20_000 });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW });
      const seed = cluster.servers[0]!.port;
      const slotOf = (key: string): number => calculateSlot(key);
      const present = `${run}:present`;
      const slot = slotOf(present);
      const fresh = keyInSlot(run, 'fresh', slot);
      const resetFresh = keyInSlot(run, 'reset', slot);
      const from = (await slotOwner(seed, slot))!;
      const to = cluster.servers.map((server) => server.port).find((port) => port !== from)!;
      const ids = new Map((await clusterNodes(seed)).map((node) => [node.port, node.id]));
      // Keys of other slots on both masters: they share the cross-slot calls with the moving slot's keys.
      const others = Array.from({ length: 40 }, (_, index) => `${run}:other:${index}`).filter((key) => slotOf(key) !== slot);
      const neighbours = others.filter((key) => masterPorts(store, [key])[0] === from).slice(0, 6);
      const across = others.filter((key) => masterPorts(store, [key])[0] === to).slice(0, 6);
      expect([neighbours.length, across.length]).toEqual([6, 6]);
      // What the callers were told: each key's admitted decisions, and every failure.
      const counted = new Map<string, number>();
      const failures: string[] = [];
      const tick = async (keys: readonly string[]): Promise<void> => {
        const answers = await Promise.allSettled([...keys.map((key) => limiter.limit(key, counting)), limiter.reset(resetFresh, counting)]);
        answers.forEach((answer, index) => {
          if (answer.status === 'rejected') failures.push(String(answer.reason));
          else if (index < keys.length && answer.value?.allowed) counted.set(keys[index]!, (counted.get(keys[index]!) ?? 0) + 1);
        });
      };
      // The neighbours first: were a key of the moving slot decided in the call, their writes would stay.
      const everyKey = [...neighbours, ...across, present, fresh];
      await tick([...neighbours, ...across, present]);

      await cliAsync(to, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', ids.get(from)!);
      await cliAsync(from, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', ids.get(to)!);
      const before = await scriptCalls([from, to]);
      // Half-moved: `present` still on the source, `fresh` (and the reset's key) missing there, so asked for on the target.
      await tick(everyKey);
      const during = await scriptCalls([from, to]);
      await cliAsync(from, 'MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', store.redisKey(present, compilePolicy(counting)));
      await tick(everyKey);
      // A stale slot table: the moving slot's keys sent to the target, which imports it (no ASKING there: not local).
      (store.client as unknown as { slots: string[][] }).slots[slot] = [`127.0.0.1:${to}`];
      await tick(everyKey);
      for (const port of [to, from, ...cluster.servers.map((server) => server.port).filter((port) => port !== to && port !== from)]) {
        await cliAsync(port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', ids.get(to)!);
      }
      await tick(everyKey);
      const recorded = await Promise.all(everyKey.map(async (key) => counting.limit - (await limiter.peek(key, counting)).remaining - 1));
      // Without the script's check, the call fails at the moving slot's key after the neighbours' writes: counted, but answered with an error.
      expect({ failures, recorded }).toEqual({ failures: [], recorded: everyKey.map((key) => counted.get(key) ?? 0) });
      // The half-moved tick: its two cross-slot calls, then the per-slot path for the three keys of the moving slot (redirected: more).
      expect(during.fcall + during.evalsha - before.fcall - before.evalsha).toBeGreaterThanOrEqual(5);
      expect(Number((await cliAsync(to, 'CLUSTER', 'COUNTKEYSINSLOT', String(slot))).trim())).toBe(2);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('after FUNCTION FLUSH on every master: the calls that find no library are decided per slot, the library is loaded again, and the next tick is one call per master again', async () => {
    const ports = cluster.servers.map((server) => server.port);
    const store = redisStore({ cluster: cluster.nodes, commandTimeoutMs: 20_000 });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW });
      const keys = Array.from({ length: 60 }, (_, index) => `${run}:flushed:${index}`);
      for (const port of ports) await cliAsync(port, 'FUNCTION', 'FLUSH');
      const first = await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      // The library is loaded again in the background: wait until every master has it.
      for (let tries = 0; (await Promise.all(ports.map((port) => cliAsync(port, 'FUNCTION', 'LIST')))).some((list) => !list.includes('tollgate_xs_')); tries++) {
        expect(tries).toBeLessThan(100);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const before = await scriptCalls(ports);
      const second = await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      const after = await scriptCalls(ports);
      expect(first.map((decision) => [decision.allowed, decision.remaining])).toEqual(keys.map(() => [true, counting.limit - 1]));
      expect(second.map((decision) => [decision.allowed, decision.remaining])).toEqual(keys.map(() => [true, counting.limit - 2]));
      expect([after.fcall - before.fcall, after.evalsha - before.evalsha]).toEqual([3, 0]);
    } finally {
      await store.close();
    }
  }, 60_000);

  it('an ACL that refuses FCALL: the first calls are refused before running and decided per slot, later ones go per slot at once; each decision counted once', async () => {
    const ports = cluster.servers.map((server) => server.port);
    for (const port of ports) await cliAsync(port, 'ACL', 'SETUSER', 'nofcall', 'on', '>secret', '~*', '&*', '+@all', '-fcall', '-fcall_ro');
    const store = redisStore({ cluster: cluster.nodes, username: 'nofcall', password: 'secret', commandTimeoutMs: 20_000 });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW });
      const keys = Array.from({ length: 60 }, (_, index) => `${run}:acl:${index}`);
      const refused = async (): Promise<number> => {
        const stats = await Promise.all(ports.map((port) => cliAsync(port, 'INFO', 'commandstats')));
        return stats.reduce((total, text) => total + Number(/cmdstat_fcall:.*rejected_calls=(\d+)/.exec(text)?.[1] ?? 0), 0);
      };
      const before = await refused();
      const first = await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      const between = await refused();
      const second = await Promise.all(keys.map((key) => limiter.limit(key, counting)));
      expect([...first, ...second].map((decision) => decision.allowed)).toEqual([...keys, ...keys].map(() => true));
      expect(first.map((decision) => decision.remaining)).toEqual(keys.map(() => counting.limit - 1));
      expect(second.map((decision) => decision.remaining)).toEqual(keys.map(() => counting.limit - 2));
      expect(between - before).toBeGreaterThan(0);
      expect(await refused()).toBe(between);
    } finally {
      await store.close();
    }
  }, 60_000);
});
