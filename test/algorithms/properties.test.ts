/**
 * Property tests (fast-check) over random policies and random traffic, for every algorithm, on the
 * memory store through the public API:
 *  - every decision is well-formed: integers, remaining in [0, limit], resetAt ≥ now,
 *    retryAfter > 0 exactly when denied;
 *  - waiting exactly retryAfter is enough for the same request, and one ms less is not;
 *  - the admitted cost in any interval never exceeds what the algorithm promises;
 *  - peek records nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore, type Decision, type Policy } from '../../src/index.js';
import { arbitraryPolicy } from '../support/arbitrary-policy.js';

const EPOCH = 1_700_000_000_000;

interface Step {
  readonly gap: number;
  readonly cost: number;
}

const arbitrarySteps: fc.Arbitrary<Step[]> = fc.array(
  fc.record({
    gap: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 50 }), fc.integer({ min: 0, max: 6_000 })),
    cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 8 })),
  }),
  { minLength: 1, maxLength: 60 },
);

function windowOf(policy: Policy): number {
  return policy.window as number;
}

/** Capacity as the limiter applies it (burst only for buckets), soft allowance included. */
function capacityOf(policy: Policy): number {
  const bucket = policy.algorithm === 'token-bucket' || policy.algorithm === 'leaky-bucket' || policy.algorithm === 'gcra';
  const nominal = bucket ? (policy.burst ?? policy.limit) : policy.limit;
  return Math.floor((nominal * (100 + (policy.softPercent ?? 0))) / 100);
}

function checkWellFormed(decision: Decision, now: number): void {
  for (const field of ['limit', 'remaining', 'resetAt', 'retryAfter'] as const) {
    expect(Number.isSafeInteger(decision[field]), `${field} = ${decision[field]}`).toBe(true);
  }
  expect(decision.remaining).toBeGreaterThanOrEqual(0);
  expect(decision.remaining).toBeLessThanOrEqual(decision.limit);
  expect(decision.resetAt).toBeGreaterThanOrEqual(now);
  expect(decision.retryAfter > 0).toBe(!decision.allowed);
}

/** The most cost the algorithm may admit within the closed interval [from, to]. */
function promisedMaximum(policy: Policy, from: number, to: number): number {
  const capacity = capacityOf(policy);
  const window = windowOf(policy);
  switch (policy.algorithm) {
    case 'sliding-log':
      // Exact: any span shorter than one window lies inside one rolling window.
      return to - from < window ? capacity : Infinity;
    case 'fixed-window':
    case 'sliding-window': {
      if (policy.windowStart === 'first-hit') {
        // Windows from first hits start at least one window apart: at most ⌈(to − from) / W⌉ + 1
        // of them start in (from − W, to], the only ones that can admit inside [from, to].
        return (Math.ceil((to - from) / window) + 1) * capacity;
      }
      // Both admit at most `capacity` per aligned window (the counter's estimate is ≥ its current
      // count); a sliding window of N buckets at most `capacity` in any N consecutive buckets.
      const buckets = policy.precision ?? 1;
      const spanned = Math.floor((to * buckets) / window) - Math.floor((from * buckets) / window) + 1;
      return Math.ceil(spanned / buckets) * capacity;
    }
    default:
      return capacity + Math.floor(((to - from) * policy.limit) / window);
  }
}

describe.each(ALGORITHMS)('%s properties', (algorithm) => {
  it('decisions are well-formed, retryAfter is exact, and admissions stay within the promise', async () => {
    await fc.assert(
      fc.asyncProperty(arbitraryPolicy(algorithm), arbitrarySteps, async (policy, steps) => {
        const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
        const admitted: { at: number; cost: number }[] = [];
        let now = EPOCH;
        for (const step of steps) {
          now += step.gap;
          const peeked = await limiter.peek('k', policy, { now, cost: step.cost });
          const decision = await limiter.limit('k', policy, { now, cost: step.cost });
          expect(decision).toEqual(peeked);
          checkWellFormed(decision, now);
          if (decision.allowed) {
            admitted.push({ at: now, cost: step.cost });
          } else if (decision.reason === undefined) {
            const retryAt = now + decision.retryAfter;
            expect((await limiter.peek('k', policy, { now: retryAt, cost: step.cost })).allowed, 'after retryAfter').toBe(true);
            if (decision.retryAfter > 1) {
              expect((await limiter.peek('k', policy, { now: retryAt - 1, cost: step.cost })).allowed, '1 ms before retryAfter').toBe(false);
            }
          } else {
            expect(decision.reason).toBe('cost-exceeds-capacity');
            expect(step.cost).toBeGreaterThan(capacityOf(policy));
          }
        }
        for (let i = 0; i < admitted.length; i++) {
          let total = 0;
          for (let j = i; j < admitted.length; j++) {
            total += admitted[j]!.cost;
            expect(total).toBeLessThanOrEqual(promisedMaximum(policy, admitted[i]!.at, admitted[j]!.at));
          }
        }
        await limiter.close();
      }),
      { numRuns: 300 },
    );
  });
});
