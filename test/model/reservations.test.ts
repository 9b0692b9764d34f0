/**
 * The model-based suite of reserve then settle: random schedules of reserves (fresh ids and
 * retries of earlier ones), settles (refunds, charges, repeats, ids never reserved, ids whose ttl
 * has passed) and plain limits, on two limiters sharing one store (each on its own connection, as
 * nodes are), checked call for call against the reference model (./reservation-reference.ts), on
 * the memory store, one Redis, a Redis Cluster and a memcached. Seedable: TOLLGATE_MODEL_SEED / _PATH / _RUNS.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLimiter, memcachedStore, memoryStore, type Decision, type Limiter, type Policy, type Store } from '../../src/index.js';
import { useMemcached } from '../support/memcached.js';
import { useRedisTopologies } from '../support/redis-topologies.js';
import { T0, checkModel, closeAll, expectDecision, freshKeys, policyArb, stepArb } from './harness.js';
import { reservationModel, type Period, type ReservationExtras } from './reservation-reference.js';
import type { ModelPolicy } from './reference.js';

const FILE = 'test/model/reservations.test.ts';
const TEST = 'a schedule of reserves, retries, settles, expiries and limits answers as the model, and a retried id never counts twice';
const CALENDAR_TEST = 'on calendar windows and with blockDuration, a schedule of reserves, settles and limits answers as the model (periods, blocks started by denied reserves, never by settles)';
const NODES = 2;
/** Ids drawn from a small pool, so retries and repeats are frequent. */
const IDS = 4;
const TTLS = [3, 40, 400, 5_000] as const;

const redis = useRedisTopologies();
const memcached = useMemcached();

type Call =
  | { readonly kind: 'reserve'; readonly node: number; readonly id: number; readonly cost: number; readonly ttl: number; readonly dt: number }
  | { readonly kind: 'settle'; readonly node: number; readonly id: number; readonly cost: number; readonly dt: number }
  | { readonly kind: 'limit'; readonly node: number; readonly cost: number; readonly dt: number };

interface Schedule {
  readonly policy: ModelPolicy;
  readonly steps: readonly Call[];
  /** The policy given to Tollgate when it is not the model's (a calendar window, a penalty). */
  readonly real?: Policy;
  readonly extras?: ReservationExtras;
  readonly start?: number;
}

const RESERVABLE = ['token-bucket', 'leaky-bucket', 'gcra', 'fixed-window', 'sliding-window', 'sliding-log'] as const;

/** Every algorithm; a sliding window of precision 1 or N (buckets of at least 1 ms). */
const reservablePolicyArb: fc.Arbitrary<ModelPolicy> = policyArb(RESERVABLE).chain((policy) =>
  policy.algorithm !== 'sliding-window' ? fc.constant(policy) : fc.constantFrom(1, 1, 2, 3, 4, 10).map((precision) => (precision > 1 && precision <= policy.window ? { ...policy, precision } : policy)),
);

const scheduleArb: fc.Arbitrary<Schedule> = reservablePolicyArb.chain((policy) => {
  const node = fc.integer({ min: 0, max: NODES - 1 });
  const id = fc.integer({ min: 0, max: IDS - 1 });
  const dt = stepArb(policy.window);
  const call: fc.Arbitrary<Call> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('reserve' as const), node, id, cost: fc.integer({ min: 1, max: 4 }), ttl: fc.constantFrom(...TTLS), dt }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('settle' as const), node, id, cost: fc.integer({ min: 0, max: 9 }), dt }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('limit' as const), node, cost: fc.integer({ min: 1, max: 3 }), dt }) },
  );
  return fc.record({ policy: fc.constant(policy), steps: fc.array(call, { minLength: 1, maxLength: 30 }) });
});

/** The cost a reserve of `id` was first made with, while its booking may be open: a retry repeats it. */
function retryCost(booked: Map<number, number>, call: Extract<Call, { kind: 'reserve' }>): number {
  return booked.get(call.id) ?? call.cost;
}

const DAY = 86_400_000;
/** A month in UTC: from the 1st, 00:00 UTC. */
const utcMonth: Period = (now) => {
  const date = new Date(now);
  return { start: Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1), end: Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1) };
};
/** A day in Asia/Kolkata (UTC+05:30 all year): from local midnight. */
const KOLKATA = 19_800_000;
const kolkataDay: Period = (now) => {
  const start = Math.floor((now + KOLKATA) / DAY) * DAY - KOLKATA;
  return { start, end: start + DAY };
};
const CALENDARS = [
  { window: 'month', timeZone: 'UTC', nominal: 30 * DAY, period: utcMonth, start: Date.UTC(2027, 0, 31, 20) },
  { window: 'day', timeZone: 'Asia/Kolkata', nominal: DAY, period: kolkataDay, start: Date.UTC(2027, 0, 31, 18) },
] as const;

/** Steps across periods: none, a few ms, up to an hour, up to three days, or a little back. */
const calendarStep = fc.oneof(
  { weight: 3, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 3 }) },
  { weight: 3, arbitrary: fc.integer({ min: 1, max: 3_600_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 3_600_000, max: 3 * DAY }) },
  { weight: 1, arbitrary: fc.integer({ min: -20, max: -1 }) },
);

function callsOf(dt: fc.Arbitrary<number>, ttls: readonly number[]): fc.Arbitrary<Call[]> {
  const node = fc.integer({ min: 0, max: NODES - 1 });
  const id = fc.integer({ min: 0, max: IDS - 1 });
  const call: fc.Arbitrary<Call> = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('reserve' as const), node, id, cost: fc.integer({ min: 1, max: 4 }), ttl: fc.constantFrom(...ttls), dt }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('settle' as const), node, id, cost: fc.integer({ min: 0, max: 9 }), dt }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('limit' as const), node, cost: fc.integer({ min: 1, max: 3 }), dt }) },
  );
  return fc.array(call, { minLength: 1, maxLength: 30 });
}

/** A calendar fixed window (a month in UTC, a day in Kolkata), with or without a penalty. */
const calendarArb: fc.Arbitrary<Schedule> = fc
  .record({ calendar: fc.constantFrom(...CALENDARS), limit: fc.integer({ min: 1, max: 8 }), softPercent: fc.constantFrom(0, 0, 50), blockMs: fc.constantFrom(0, 0, 30_000) })
  .chain(({ calendar, limit, softPercent, blockMs }) => {
    const soft = softPercent > 0 ? { softPercent } : {};
    const policy: ModelPolicy = { algorithm: 'fixed-window', limit, window: calendar.nominal, ...soft };
    const real: Policy = { algorithm: 'fixed-window', limit, window: calendar.window, timeZone: calendar.timeZone, ...soft, ...(blockMs > 0 ? { blockDuration: blockMs } : {}) };
    const extras = { period: calendar.period, blockMs };
    return callsOf(calendarStep, [3, 60_000, 3_600_000, DAY]).map((steps) => ({ policy, real, extras, start: calendar.start, steps }));
  });

/** Any reservable algorithm with a penalty of a few ms to a few windows. */
const blockArb: fc.Arbitrary<Schedule> = fc.tuple(reservablePolicyArb, fc.constantFrom(1, 50, 1_000)).chain(([policy, blockMs]) =>
  callsOf(stepArb(policy.window), TTLS).map((steps) => ({ policy, real: { ...policy, blockDuration: blockMs } as Policy, extras: { blockMs }, steps })),
);

async function play(limiters: readonly Limiter[], schedule: Schedule): Promise<void> {
  const [key] = freshKeys(1, 'reservations');
  const model = reservationModel(schedule.policy, schedule.extras);
  const policy = schedule.real ?? schedule.policy;
  const booked = new Map<number, number>();
  const start = schedule.start ?? T0;
  let now = start;
  for (const [index, step] of schedule.steps.entries()) {
    now = Math.max(start, now + step.dt);
    const limiter = limiters[step.node]!;
    const what = `step ${index}: ${JSON.stringify(step)} at start+${now - start}`;
    if (step.kind === 'limit') {
      expectDecision(await limiter.limit(key!, policy, { now, cost: step.cost }), model.limit(now, step.cost) as Decision, what);
    } else if (step.kind === 'reserve') {
      const cost = retryCost(booked, step);
      const expected = model.reserve(now, `id${step.id}`, cost, step.ttl);
      const answer = await limiter.reserve(key!, policy, { now, cost, id: `id${step.id}`, ttl: step.ttl });
      expect(expected, what).not.toBe('conflict');
      expectDecision(answer, expected as Decision, what);
      expect(answer.settled, `${what}: the settled cost of a retry`).toBe((expected as { settled?: number }).settled);
      if (answer.allowed) booked.set(step.id, cost);
    } else {
      const expected = model.settle(now, `id${step.id}`, step.cost);
      const { status, reserved, cost, decision } = await limiter.settle(key!, policy, { now, cost: step.cost, id: `id${step.id}` });
      expect({ status, reserved, cost, remaining: decision.remaining }, what).toEqual(expected);
    }
  }
}

/** Stores to run on: a memory store shared by both limiters, or a connection per limiter. */
const TOPOLOGIES: readonly { readonly name: string; readonly runs: number; readonly refuses?: string; open(): Promise<Store[]> }[] = [
  { name: 'memory store', runs: 150, open: async () => [memoryStore({ sweepIntervalMs: 0 })] },
  { name: 'single Redis', runs: 30, open: () => Promise.all(Array.from({ length: NODES }, () => redis.open({ url: redis.single.url }))) },
  { name: 'Redis Cluster', runs: 20, open: () => Promise.all(Array.from({ length: NODES }, () => redis.open({ cluster: redis.cluster.nodes }))) },
  // The state and its reservation records in one item, each call one compare-and-set step.
  // (No sliding log: the store refuses the algorithm, docs/memcached.md.)
  { name: 'Memcached store', runs: 20, refuses: 'sliding-log', open: async () => Array.from({ length: NODES }, () => memcachedStore({ servers: memcached().address })) },
];

/**
 * Long sliding logs and bucketed windows: limits up to 20 and short steps, so a log holds many
 * entries and a refund finds its entry among older and newer ones (either side rewritten on Redis).
 */
const LOG_TEST = 'on sliding logs and windows of precision N, long schedules of reserves, settles and limits answer as the model (refunds amid many entries or buckets, after they left the window)';
const logArb: fc.Arbitrary<Schedule> = fc
  .record({ log: fc.boolean(), limit: fc.integer({ min: 6, max: 20 }), window: fc.constantFrom(100, 1_000), precision: fc.constantFrom(2, 4, 10), blockMs: fc.constantFrom(0, 0, 0, 50) })
  .chain(({ log, limit, window, precision, blockMs }) => {
    const policy: ModelPolicy = log ? { algorithm: 'sliding-log', limit, window } : { algorithm: 'sliding-window', limit, window, precision };
    const dt = fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: Math.floor(window / 10) }) }, { weight: 1, arbitrary: fc.integer({ min: window / 2, max: window * 2 }) }, { weight: 1, arbitrary: fc.integer({ min: -5, max: -1 }) });
    const steps = callsOf(dt, [window / 2, window * 3]).chain((first) => callsOf(dt, [window / 2, window * 3]).map((second) => [...first, ...second]));
    return steps.map((calls) => ({ policy, real: { ...policy, ...(blockMs > 0 ? { blockDuration: blockMs } : {}) } as Policy, extras: { blockMs }, steps: calls }));
  });

/** Calendar windows and penalties: half the schedules each. */
const extendedArb = fc.oneof(calendarArb, blockArb);

/** Plays `name`'s schedules on every topology, two limiters sharing the store. */
function describeSchedules(title: string, name: string, schedules: fc.Arbitrary<Schedule>): void {
  describe.each(TOPOLOGIES)(`${title}, on the $name`, (topology) => {
    it(name, async () => {
      const stores = await topology.open();
      const limiters = Array.from({ length: NODES }, (_, i) => createLimiter({ store: stores[i % stores.length]!, deadlineMs: 5_000 }));
      try {
        const played = topology.refuses === undefined ? schedules : schedules.filter((schedule) => schedule.policy.algorithm !== topology.refuses);
        await checkModel(FILE, name, fc.asyncProperty(played, (schedule) => play(limiters, schedule)), topology.runs);
      } finally {
        if (topology.name === 'memory store' || topology.name === 'Memcached store') await closeAll(limiters);
      }
    }, 60_000);
  });
}

describeSchedules('reserve then settle against the model', TEST, scheduleArb);
describeSchedules('reserve then settle on calendar windows and with penalties against the model', CALENDAR_TEST, extendedArb);
describeSchedules('reserve then settle on sliding logs and bucketed windows against the model', LOG_TEST, logArb);
