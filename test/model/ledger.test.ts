/**
 * The model-based suite of the usage ledger (docs/quotas.md §3): random schedules of requests on a
 * few keys — with fresh request ids, retries of earlier ids and none — under a calendar day's
 * quota whose ledger sums per UTC day, time moving on over day boundaries, and exports of every
 * day seen so far, checked against a reference model: what each key was admitted (a retried id
 * once, while it is among the last `ids` ids of its key and day), what was refused, and no day
 * exported once its retention (`keep` days) has passed. On the memory store, one Redis and a
 * Redis Cluster, two limiters sharing the store. Seedable: TOLLGATE_MODEL_SEED / _PATH / _RUNS.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, type Limiter, type Policy, type Store } from '../../src/index.js';
import { periodName } from '../../src/algorithms/ledger-periods.js';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { T0, checkModel, closeAll, freshKeys } from './harness.js';

const FILE = 'test/model/ledger.test.ts';
const TEST = 'a schedule of admits, refusals, retried ids and day rolls exports what the model billed, and nothing past retention';
const DAY = 86_400_000;
const KEYS = 3;
const IDS = 5;
const NODES = 2;

const redis = useRedisTopologies();

interface Step {
  readonly node: number;
  readonly key: number;
  /** -1: no request id. */
  readonly id: number;
  readonly cost: number;
  readonly dt: number;
  readonly exportAfter: boolean;
}

interface Schedule {
  readonly limit: number;
  readonly keep: number;
  readonly ids: number;
  readonly steps: readonly Step[];
}

const scheduleArb: fc.Arbitrary<Schedule> = fc.record({
  limit: fc.integer({ min: 1, max: 8 }),
  keep: fc.integer({ min: 1, max: 3 }),
  ids: fc.integer({ min: 1, max: 4 }),
  steps: fc.array(
    fc.record({
      node: fc.integer({ min: 0, max: NODES - 1 }),
      key: fc.integer({ min: 0, max: KEYS - 1 }),
      id: fc.integer({ min: -1, max: IDS - 1 }),
      cost: fc.integer({ min: 1, max: 3 }),
      // Mostly within the day, sometimes over one or two boundaries.
      dt: fc.oneof({ weight: 5, arbitrary: fc.integer({ min: 0, max: 3 * 3_600_000 }) }, { weight: 1, arbitrary: fc.integer({ min: DAY / 2, max: 2 * DAY }) }),
      exportAfter: fc.boolean(),
    }),
    { minLength: 1, maxLength: 40 },
  ),
});

/** The reference: per day and key, the window count, the billed sums and the ids remembered. */
class LedgerModel {
  private readonly days = new Map<number, Map<number, { count: number; admitted: number; refused: number; ids: string[] }>>();

  constructor(private readonly schedule: Schedule) {}

  request(now: number, key: number, cost: number, id: string | undefined): boolean {
    const day = Math.floor(now / DAY) * DAY;
    let keys = this.days.get(day);
    if (keys === undefined) this.days.set(day, (keys = new Map()));
    let sums = keys.get(key);
    if (sums === undefined) keys.set(key, (sums = { count: 0, admitted: 0, refused: 0, ids: [] }));
    const allowed = sums.count + cost <= this.schedule.limit;
    if (!allowed) {
      sums.refused += cost;
      return false;
    }
    sums.count += cost;
    if (id !== undefined && sums.ids.includes(id)) return true;
    if (id !== undefined) {
      sums.ids.push(id);
      if (sums.ids.length > this.schedule.ids) sums.ids.shift();
    }
    sums.admitted += cost;
    return true;
  }

  /** Each day seen: what its export holds at `now` (nothing once `keep` days from its start have passed). */
  exports(now: number): [number, Map<number, { admitted: number; refused: number }>][] {
    return [...this.days].map(([day, keys]) => [day, day + this.schedule.keep * DAY <= now ? new Map() : new Map([...keys].map(([key, sums]) => [key, { admitted: sums.admitted, refused: sums.refused }]))]);
  }
}

/**
 * Each run starts 100 days after the last one began (a schedule spans at most 80): a day's retention
 * is the longest `keep` of the ledgers that wrote it, so runs of other `keep`s must not share days.
 */
let runStart = T0;

async function play(limiters: readonly Limiter[], schedule: Schedule): Promise<void> {
  const keys = freshKeys(KEYS, 'ledger');
  runStart += 100 * DAY;
  const policy: Policy = { algorithm: 'fixed-window', limit: schedule.limit, window: 'day', ledger: { refused: true, keep: schedule.keep, ids: schedule.ids } };
  const model = new LedgerModel(schedule);
  let now = runStart;
  for (const [index, step] of schedule.steps.entries()) {
    now += step.dt;
    const id = step.id < 0 ? undefined : `req-${step.id}`;
    const what = `step ${index}: ${JSON.stringify(step)} at ${new Date(now).toISOString()}`;
    const decision = await limiters[step.node]!.limit(keys[step.key]!, policy, { now, cost: step.cost, ...(id === undefined ? {} : { requestId: id }) });
    expect(decision.allowed, what).toBe(model.request(now, step.key, step.cost, id));
    if (step.exportAfter || index === schedule.steps.length - 1) await compare(limiters[0]!, keys, model, now, what);
  }
}

async function compare(limiter: Limiter, keys: readonly string[], model: LedgerModel, now: number, what: string): Promise<void> {
  for (const [day, expected] of model.exports(now)) {
    const period = periodName('day', 'UTC', day);
    const actual = new Map<number, { admitted: number; refused: number }>();
    for await (const row of limiter.ledger.export({ period, now })) {
      const key = keys.indexOf(row.key);
      if (key < 0) continue;
      expect(actual.has(key), `${what}: ${row.key} exported twice for ${period}`).toBe(false);
      expect([row.periodStart, row.periodEnd], what).toEqual([day, day + DAY]);
      actual.set(key, { admitted: row.admitted, refused: row.refused });
    }
    expect(actual, `${what}: export of ${period}`).toEqual(expected);
  }
}

const TOPOLOGIES: readonly { readonly name: string; readonly runs: number; open(): Promise<Store[]> }[] = [
  { name: 'memory store', runs: 150, open: async () => [memoryStore({ sweepIntervalMs: 0 })] },
  { name: 'single Redis', runs: 30, open: () => Promise.all(Array.from({ length: NODES }, () => redis.open({ url: redis.single.url }))) },
  { name: 'Redis Cluster', runs: 20, open: () => Promise.all(Array.from({ length: NODES }, () => redis.open({ cluster: redis.cluster.nodes }))) },
];

describe.each(TOPOLOGIES)('the usage ledger against the model, on the $name', (topology) => {
  it(TEST, async () => {
    const stores = await topology.open();
    const limiters = Array.from({ length: NODES }, (_, i) => createLimiter({ store: stores[i % stores.length]!, deadlineMs: 5_000 }));
    try {
      await checkModel(FILE, TEST, fc.asyncProperty(scheduleArb, (schedule) => play(limiters, schedule)), topology.runs);
    } finally {
      if (topology.name === 'memory store') await closeAll(limiters);
    }
  }, 120_000);
});
