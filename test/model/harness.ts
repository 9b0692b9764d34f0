/**
 * What the model-based suite's properties share: how many runs (bounded for CI, more with
 * `TOLLGATE_MODEL_RUNS`), replaying a failure (`TOLLGATE_MODEL_SEED` and `TOLLGATE_MODEL_PATH`,
 * printed with every failure), the policies and time steps the schedules draw, fresh keys, and
 * comparing a decision with the model's.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Decision, Limiter } from '../../src/index.js';
import { MODEL_ALGORITHMS, type ModelAlgorithm, type ModelDecision, type ModelPolicy } from './reference.js';

/** Schedules start here: an hour boundary, so every window of the schedules is aligned on it. */
export const T0 = 1_800_000_000_000;

/** Runs of one property: `defaultRuns` (what CI can afford), or `TOLLGATE_MODEL_RUNS` for a longer run. */
export function modelRuns(defaultRuns: number): number {
  const asked = process.env.TOLLGATE_MODEL_RUNS;
  if (asked === undefined || asked === '') return defaultRuns;
  const runs = Number(asked);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`TOLLGATE_MODEL_RUNS must be a whole number ≥ 1, got ${JSON.stringify(asked)}`);
  return runs;
}

/**
 * Checks `property` over `runs` random schedules (fast-check); a failure throws fast-check's
 * report (the shrunk counterexample) with the line that replays it.
 */
export async function checkModel<Ts>(file: string, test: string, property: fc.IAsyncProperty<Ts>, runs: number): Promise<void> {
  const seed = process.env.TOLLGATE_MODEL_SEED;
  const path = process.env.TOLLGATE_MODEL_PATH;
  const params: fc.Parameters<Ts> = {
    numRuns: modelRuns(runs),
    // One shrink step is a whole schedule on real Redis: enough of them to find a small case, not forever.
    maxSkipsPerRun: 10,
    endOnFailure: false,
    interruptAfterTimeLimit: 600_000,
    ...(seed !== undefined && seed !== '' ? { seed: Number(seed) } : {}),
    ...(path !== undefined && path !== '' ? { path } : {}),
  };
  const details = await fc.check(property, params);
  if (!details.failed) return;
  // vitest's -t is a regular expression: the test's name, escaped.
  const pattern = test.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const replay = `replay: TOLLGATE_MODEL_SEED=${details.seed} TOLLGATE_MODEL_PATH=${details.counterexamplePath ?? ''} npx vitest run ${file} -t "${pattern}"`;
  const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  throw new Error(`${fc.defaultReportMessage(details) ?? 'property failed'}\n${error}\n${replay}`);
}

/** A fresh key for each run (and each shrink step): no run sees another's state, on any store. */
let runs = 0;
export function freshKeys(count: number, label: string): string[] {
  runs += 1;
  return Array.from({ length: count }, (_, i) => `model:${label}:${process.pid}:${runs}:${i}`);
}

/** Windows: a few ms (drains faster than one per ms at small limits), a second, a minute. */
const WINDOWS = [7, 100, 1_000, 60_000] as const;

/** A policy of one of `algorithms`, with the options the model covers (burst, soft throttling, first-hit windows). */
export function policyArb(algorithms: readonly ModelAlgorithm[] = MODEL_ALGORITHMS, limits: { min: number; max: number } = { min: 1, max: 8 }): fc.Arbitrary<ModelPolicy> {
  return fc
    .record({
      algorithm: fc.constantFrom(...algorithms),
      limit: fc.integer(limits),
      window: fc.constantFrom(...WINDOWS),
      extraBurst: fc.option(fc.integer({ min: 0, max: 4 }), { freq: 2 }),
      softPercent: fc.constantFrom(0, 0, 0, 25, 50, 100),
      firstHit: fc.boolean(),
    })
    .map(({ algorithm, limit, window, extraBurst, softPercent, firstHit }) => ({
      algorithm,
      limit,
      window,
      ...(extraBurst !== null && (algorithm === 'token-bucket' || algorithm === 'leaky-bucket' || algorithm === 'gcra') ? { burst: limit + extraBurst } : {}),
      ...(softPercent > 0 ? { softPercent } : {}),
      ...(firstHit && algorithm === 'fixed-window' ? { windowStart: 'first-hit' as const } : {}),
    }));
}

/**
 * Time to the next step, in ms: often none (requests at one instant), a few ms, a share of the
 * window, or about a whole window (edges, expiry).
 */
export function stepArb(window: number): fc.Arbitrary<number> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) },
    { weight: 3, arbitrary: fc.integer({ min: 1, max: window }) },
    { weight: 1, arbitrary: fc.integer({ min: Math.max(1, window - 2), max: window * 2 + 2 }) },
    { weight: 1, arbitrary: fc.integer({ min: -Math.min(window, 20), max: -1 }) },
  );
}

/** The fields of `decision` the model pins (all of them). */
export function pinned(decision: Decision | ModelDecision): Decision {
  const { allowed, limit, remaining, resetAt, retryAfter, now, delay, reason } = decision;
  return { allowed, limit, remaining, resetAt, retryAfter, now, ...(delay !== undefined ? { delay } : {}), ...(reason !== undefined ? { reason } : {}) };
}

/** Throws (for fast-check to shrink) when `actual` is not the model's decision. */
export function expectDecision(actual: Decision, model: Decision | ModelDecision, what: string): void {
  expect(pinned(actual), `${what}: got ${JSON.stringify(pinned(actual))}, the model says ${JSON.stringify(pinned(model))}`).toEqual(pinned(model));
}

/** Closes limiters that share one store: the store once, after every limiter's own close. */
export async function closeAll(limiters: readonly Limiter[]): Promise<void> {
  await Promise.all(limiters.map((limiter) => limiter.close()));
}

/** The end of the aligned window of `window` ms holding `at`. */
export const windowOf = (at: number, window: number): number => Math.floor(at / window) * window;
