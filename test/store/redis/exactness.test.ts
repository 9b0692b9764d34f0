/**
 * Exactness across processes: 4 OS processes × 64 concurrent calls make 5,000 attempts on one key
 * with a limit of 1,000 (a window long enough that nothing refills during the test). Exactly
 * 1,000 must be admitted, for every algorithm, on a single Redis and on a 3-master Cluster.
 *
 * The six algorithms are hammered at once, each on its own key with its own 64 callers per process,
 * by the same 4 processes (starting a process costs more than its thousand decisions).
 * And multi-limit calls racing on shared states from 3 processes: all-or-nothing, every count
 * exactly the admitted calls that name it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../../src/algorithms/catalog.js';
import { createLimiter, type Policy } from '../../../src/index.js';
import { useRedisTopologies } from '../../support/redis-topologies.js';

const runWorker = promisify(execFile);
const WORKER = new URL('../../support/hammer-worker.mjs', import.meta.url).pathname;
const LIMIT_ALL_WORKER = new URL('../../support/limit-all-worker.mjs', import.meta.url).pathname;
const PROCESSES = 4;
const CONCURRENCY = 64;
const ATTEMPTS = 5_000;
const LIMIT = 1_000;

const redis = useRedisTopologies();

interface Tally {
  readonly admitted: number;
  readonly failed: number;
}

/** Every algorithm's key hammered at once by {@link PROCESSES} processes: each algorithm's tally over them. */
async function hammer(storeOptions: object): Promise<Map<string, Tally>> {
  const stamp = Date.now();
  const jobs = ALGORITHMS.map((algorithm) => ({ policy: { algorithm, limit: LIMIT, window: '1d' }, key: `hammer:${algorithm}:${stamp}` }));
  const outputs = await Promise.all(
    Array.from({ length: PROCESSES }, () =>
      // 'throw': a store error is a failed call, never a failure-mode answer that admits (a 1 s
      // command timeout on a loaded machine once read as 1,770 admitted of 1,000 on the Cluster).
      runWorker(process.execPath, [WORKER, JSON.stringify(storeOptions), JSON.stringify(jobs), String(ATTEMPTS / PROCESSES), String(CONCURRENCY), JSON.stringify({ failureMode: 'throw' })]),
    ),
  );
  const parts = outputs.map(({ stdout }) => JSON.parse(stdout) as Tally[]);
  return new Map(
    ALGORITHMS.map((algorithm, job) => [
      algorithm,
      parts.map((part) => part[job]!).reduce((total, part) => ({ admitted: total.admitted + part.admitted, failed: total.failed + part.failed })),
    ]),
  );
}

describe.each([
  ['single Redis', () => ({ url: redis.single.url, commandTimeoutMs: 20_000 })],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 })],
])(`exactness across ${PROCESSES} processes on %s`, (_topology, storeOptions) => {
  let tallies: Map<string, Tally>;
  beforeAll(async () => {
    tallies = await hammer(storeOptions());
  }, 120_000);

  it.each(ALGORITHMS)('%s admits exactly the limit', (algorithm) => {
    expect(tallies.get(algorithm)).toEqual({ admitted: LIMIT, failed: 0 });
  });
});

/** FCALLs made so far on `nodes` (INFO commandstats): a lone decision is one. */
async function fcallsOn(nodes: readonly { host: string; port: number }[]): Promise<number> {
  let calls = 0;
  for (const node of nodes) {
    const client = new Redis(node.port, node.host);
    try {
      calls += Number(/cmdstat_fcall:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
    } finally {
      client.disconnect();
    }
  }
  return calls;
}

/**
 * Lone decisions (scripts/single.lua by FCALL): the hammer above always has a batch waiting, so it
 * never takes the lean path. Here each process has one decision in flight, on one algorithm at a
 * time, so every call is a batch of one; the FCALLs counted on the servers prove it.
 */
describe.each([
  ['single Redis', () => ({ url: redis.single.url, commandTimeoutMs: 20_000 }), () => [{ host: '127.0.0.1', port: Number(new URL(redis.single.url).port) }]],
  ['Redis Cluster', () => ({ cluster: redis.cluster.nodes, commandTimeoutMs: 20_000 }), () => redis.cluster.nodes],
])(`exactness of lone decisions across ${PROCESSES} processes on %s`, (_topology, storeOptions, nodes) => {
  const LONE_ATTEMPTS = 1_200;
  it.each(['fixed-window', 'token-bucket', 'sliding-window'] as const)('%s admits exactly the limit', async (algorithm) => {
    const job = { policy: { algorithm, limit: LIMIT, window: '1d' }, key: `lone:${algorithm}:${Date.now()}` };
    const before = await fcallsOn(nodes());
    const outputs = await Promise.all(
      Array.from({ length: PROCESSES }, () =>
        runWorker(process.execPath, [WORKER, JSON.stringify(storeOptions()), JSON.stringify([job]), String(LONE_ATTEMPTS / PROCESSES), '1', JSON.stringify({ failureMode: 'throw' })]),
      ),
    );
    const tallies = outputs.map(({ stdout }) => (JSON.parse(stdout) as Tally[])[0]!);
    expect(tallies.reduce((total, part) => ({ admitted: total.admitted + part.admitted, failed: total.failed + part.failed }))).toEqual({ admitted: LIMIT, failed: 0 });
    expect((await fcallsOn(nodes())) - before).toBeGreaterThanOrEqual(LONE_ATTEMPTS);
  }, 120_000);
});

/** Three states of three algorithms (a day's window, one explicit `now`: nothing refills). */
const SHARED: readonly Policy[] = [
  { algorithm: 'fixed-window', limit: 30, window: '1d' },
  { algorithm: 'token-bucket', limit: 40, window: '1d' },
  { algorithm: 'sliding-log', limit: 50, window: '1d' },
];
/** Each multi-limit call names two of the three states: every pair, so each state is raced for by two kinds of call. */
const PAIRS = [[0, 1], [1, 2], [0, 2]] as const;
const RACERS = 3;
const CALLS_PER_RACER = 150;

interface RaceResult {
  readonly admitted: number[];
  readonly denied: number[];
  readonly failed: number;
}

/** On one Redis, three keys; on a Cluster, one identity's three states (one slot: a multi-limit check is one script call). */
const RACES = [
  { name: 'single Redis', store: () => ({ url: redis.single.url }), keyOf: (i: number) => `race:${i}` },
  { name: 'Redis Cluster', store: () => ({ cluster: redis.cluster.nodes }), keyOf: () => 'race:user' },
];

describe('multi-limit calls racing across processes', () => {
  it('concurrent limitAll calls on shared states from 3 processes, on one Redis and on a Cluster: never a partial debit, each count exactly the admitted calls that name it', async () => {
    const run = `${Date.now()}-${Math.random().toString(36).slice(2)}`;
    const scenarios = RACES.map((race) => {
      const states = SHARED.map((policy, i) => ({ key: `${race.keyOf(i)}:${run}`, policy }));
      return { store: race.store(), states, groups: PAIRS.map((pair) => pair.map((i) => states[i]!)) };
    });
    const now = Date.now();
    const arguments_ = [JSON.stringify(scenarios.map(({ store, groups }) => ({ store, groups }))), String(CALLS_PER_RACER), '32', String(now)];
    const outputs = await Promise.all(Array.from({ length: RACERS }, () => runWorker(process.execPath, [LIMIT_ALL_WORKER, ...arguments_])));
    const perRacer = outputs.map(({ stdout }) => JSON.parse(stdout) as RaceResult[]);
    for (const [index, { store, states }] of scenarios.entries()) {
      const where = RACES[index]!.name;
      const results = perRacer.map((racer) => racer[index]!);
      const admitted = PAIRS.map((_, group) => results.reduce((sum, result) => sum + result.admitted[group]!, 0));
      const denied = PAIRS.map((_, group) => results.reduce((sum, result) => sum + result.denied[group]!, 0));
      expect(results.map((result) => result.failed), where).toEqual([0, 0, 0]);
      expect(admitted.reduce((a, b) => a + b) + denied.reduce((a, b) => a + b), where).toBe(RACERS * CALLS_PER_RACER);
      // What each state holds, read after the race at the same instant.
      const limiter = createLimiter({ store: await redis.open(store), deadlineMs: 10_000 });
      const counts = await Promise.all(states.map(async ({ key, policy }) => policy.limit - (await limiter.look(key, policy, { now })).remaining));
      const expected = SHARED.map((_, state) => PAIRS.reduce((sum, pair, group) => sum + ((pair as readonly number[]).includes(state) ? admitted[group]! : 0), 0));
      expect(counts, `${where}: admitted per pair ${admitted.join(', ')}`).toEqual(expected);
      for (const [state, policy] of SHARED.entries()) expect(counts[state], where).toBeLessThanOrEqual(policy.limit);
      // Exact, not only safe: a call was denied only when one of its states was full, and counts only grow.
      for (const [group, pair] of PAIRS.entries()) {
        if (denied[group]! > 0) expect(pair.some((state) => counts[state] === SHARED[state]!.limit), `${where}: pair ${pair.join('+')} denied ${denied[group]} times`).toBe(true);
      }
    }
  }, 60_000);
});
