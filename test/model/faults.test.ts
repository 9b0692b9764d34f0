/**
 * The model-based suite under faults, on a real Redis: random schedules of exact-mode calls with,
 * here and there, a slow call (it reaches Redis after its deadline, and counts there), a hung call
 * (never settles) and a restart of Redis (its data lost). Each decision is the model's (whose
 * state restarts with Redis's, and takes in the slow calls that landed) or, when the store could
 * not answer in time, the failure mode's answer (docs/operations.md), by the call's deadline; a
 * hung call frees its place in flight then. `local` is checked against a model of its own: the
 * in-process limiter, fed only the calls it answered. Runs with the chaos tests (vitest.config.ts),
 * one file at a time after the rest, so the suite's load does not count against the deadline.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, redisStore, type Decision, type RedisStore } from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { FaultyStore } from './faulty-store.js';
import { T0, checkModel, expectDecision, freshKeys, pinned, policyArb, stepArb } from './harness.js';
import { capacityOf, referenceModel, type KeyModel, type ModelPolicy } from './reference.js';

const FILE = 'test/model/faults.test.ts';
/** Runs in CI: each costs a restart at most and a few slow calls; TOLLGATE_MODEL_RUNS for more. */
const RUNS = 5;
/** The deadline of a faulty call, how late a slow call reaches Redis, and the slack a loaded machine gets. */
const DEADLINE_MS = 50;
const SLOW_MS = 120;
const SLACK_MS = 250;

const server = useRedisServer();

type Kind = 'call' | 'slow' | 'hang' | 'restart';
type Mode = 'open' | 'closed' | 'local';

interface Schedule {
  readonly policy: ModelPolicy;
  readonly failureMode: Mode;
  /** `expectedNodes`: `local` enforces ⌈limit / n⌉ (and burst) on its own. */
  readonly expectedNodes: number;
  readonly steps: readonly { readonly kind: Kind; readonly cost: number; readonly dt: number }[];
}

const scheduleArb: fc.Arbitrary<Schedule> = policyArb().chain((policy) =>
  fc.record({
    policy: fc.constant(policy),
    failureMode: fc.constantFrom<Mode>('open', 'closed', 'local'),
    expectedNodes: fc.integer({ min: 1, max: 3 }),
    steps: fc
      .array(
        fc.record({
          kind: fc.constantFrom<Kind>('call', 'call', 'call', 'call', 'call', 'call', 'slow', 'hang', 'restart'),
          cost: fc.integer({ min: 1, max: 3 }),
          dt: stepArb(policy.window),
        }),
        { minLength: 1, maxLength: 16 },
      )
      // One restart a schedule at most: each costs a server's stop and start.
      .filter((steps) => steps.filter((step) => step.kind === 'restart').length <= 1),
  }),
);

/** The failure mode's answer (docs/operations.md, "The failure mode"); `local` decides on its own model. */
function expectFailureAnswer(actual: Decision, mode: Mode, policy: ModelPolicy, local: KeyModel, now: number, cost: number, what: string): void {
  const nominal = capacityOf(policy).nominal;
  if (mode === 'local') {
    expectDecision(actual, { ...local.limit(now, cost), reason: 'local-fallback' }, `${what}: local's own limiter`);
    return;
  }
  expect(actual.resetAt, `${what}: resetAt never before now`).toBeGreaterThanOrEqual(now);
  if (mode === 'open') expect({ ...pinned(actual), resetAt: 0 }, what).toEqual({ allowed: true, limit: nominal, remaining: Math.max(0, nominal - cost), resetAt: 0, retryAfter: 0, now, reason: 'fail-open' });
  else expect({ allowed: actual.allowed, retryAfter: actual.retryAfter, now: actual.now, reason: actual.reason }, what).toEqual({ allowed: false, retryAfter: 1_000, now, reason: 'fail-closed' });
}

/** Waits until `store` answers again after a restart (reconnected, scripts loaded again). */
async function answering(store: RedisStore): Promise<void> {
  const probe = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: 1_000 });
  for (let attempt = 0; ; attempt++) {
    try {
      await store.peek('model:probe', probe, 1, undefined);
      return;
    } catch (error) {
      if (attempt > 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

describe('model: faults on a real Redis (slow calls, hung calls, a restart)', () => {
  const name = 'guarantee: under slow calls, hung calls and a restart, every decision is the model\'s or, by its deadline, the failure mode\'s';
  it(name, async () => {
    const store = redisStore({ url: server.url });
    server.stores.push(store);
    await store.ready();
    await checkModel(
      FILE,
      name,
      fc.asyncProperty(scheduleArb, async ({ policy, failureMode, expectedNodes, steps }) => {
        const [key] = freshKeys(1, 'faults');
        const faulty = new FaultyStore(store, SLOW_MS);
        // A breaker that probes soon again: the schedule runs in a few ms of real time.
        const limiter = createLimiter({ store: faulty, failureMode, expectedNodes, deadlineMs: 5_000, breaker: { openMs: 20 } });
        let model = referenceModel(policy);
        const share = (units: number): number => Math.ceil(units / expectedNodes);
        const local = referenceModel({ ...policy, limit: share(policy.limit), ...(policy.burst !== undefined ? { burst: share(policy.burst) } : {}) });
        let now = T0;
        for (const [i, { kind, cost, dt }] of steps.entries()) {
          now += dt;
          const what = `step ${i} (${kind}, cost ${cost} at T0+${now - T0})`;
          if (kind === 'restart') {
            await server.restart();
            await answering(store);
            model = referenceModel(policy);
            continue;
          }
          if (kind !== 'call') faulty.fault(kind);
          const started = performance.now();
          const decision = await limiter.limit(key!, policy, { now, cost, ...(kind === 'call' ? {} : { deadlineMs: DEADLINE_MS }) });
          const elapsed = performance.now() - started;
          // The breaker may have answered without calling the store: then the fault was never met.
          const reached = kind === 'call' || !faulty.pending;
          if (!reached) faulty.fault(undefined);
          if (decision.reason === 'fail-open' || decision.reason === 'fail-closed' || decision.reason === 'local-fallback') {
            expectFailureAnswer(decision, failureMode, policy, local, now, cost, what);
          } else {
            expect(kind, `${what}: a faulty call is the failure mode's`).toBe('call');
            expectDecision(decision, model.limit(now, cost), what);
          }
          if (kind === 'call') continue;
          expect(elapsed, `${what}: answered by its deadline`).toBeLessThanOrEqual(DEADLINE_MS + SLACK_MS);
          expect(limiter.health().inFlight, `${what}: its place in flight is free at its deadline`).toBe(0);
          // A slow call lands in Redis after its deadline: it counts there, and Redis's answer to it is the model's.
          if (kind === 'slow' && reached) for (const landed of await faulty.landed()) expectDecision(landed, model.limit(now, cost), `${what}: landed late`);
        }
      }),
      RUNS,
    );
  }, 120_000);
});
