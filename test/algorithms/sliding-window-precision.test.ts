/**
 * sliding-window with `precision: N` (docs/semantics.md, "sliding-window with precision N"):
 *  - the policy field is validated (range, algorithm, buckets of at least 1 ms) and keeps its own state;
 *  - on the memory store every decision equals a naive BigInt model of the spec (random traffic,
 *    clock going back, peeks, costs, soft and wide policies);
 *  - the bucket algorithm at N = 1 decides exactly as the two-window counter (the spec reduces to it);
 *  - bucket records are reused when keys go, and a reused record starts fresh.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideSlidingBuckets } from '../../src/algorithms/sliding-window-buckets.js';
import { slidingWindow } from '../../src/algorithms/sliding-window.js';
import { createLimiter, InvalidPolicyError, memoryStore, type Policy } from '../../src/index.js';
import { compilePolicy } from '../../src/policy.js';
import { slidingBucketsModel } from '../support/reference-model.js';

const EPOCH = 1_700_000_000_000;

describe('precision: the policy field', () => {
  it.each([
    [{ precision: 0 }, /precision must be a whole number ≥ 1, got 0/],
    [{ precision: 2.5 }, /precision must be a whole number ≥ 1, got 2.5/],
    [{ precision: '10' }, /precision must be a finite number, got "10"/],
    [{ precision: 101 }, /precision 101 is above 100; for an exact rolling window use sliding-log/],
    [{ precision: 60, window: 50 }, /precision 60 splits a window of 50 ms into buckets shorter than 1 ms; lower the precision to 50 or less/],
    [{ precision: 4, algorithm: 'fixed-window' }, /precision applies to sliding-window only, not fixed-window/],
  ])('refuses %o', (fields, message) => {
    const policy = { algorithm: 'sliding-window', limit: 10, window: 60_000, ...fields } as Policy;
    expect(() => compilePolicy(policy)).toThrow(InvalidPolicyError);
    expect(() => compilePolicy(policy)).toThrow(message);
  });

  it('keeps a state of its own per precision; precision 1 is the plain sliding window', () => {
    const of = (precision?: number) => compilePolicy({ algorithm: 'sliding-window', limit: 10, window: 60_000, ...(precision === undefined ? {} : { precision }) });
    expect(of(1).stateId).toBe(of().stateId);
    expect(of(1).stateId).toBe('sliding-window:60000');
    expect(of(10).stateId).toBe('sliding-window/10:60000');
    expect(new Set([of(), of(4), of(10)].map((policy) => policy.stateId)).size).toBe(3);
  });

  it('counts each precision apart on one key, and a cached policy literal keeps its precision', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy = (precision: number): Policy => ({ algorithm: 'sliding-window', limit: 2, window: 1000, precision });
    for (let i = 0; i < 2; i++) expect((await limiter.limit('k', policy(4), { now: EPOCH })).allowed).toBe(true);
    expect((await limiter.limit('k', policy(4), { now: EPOCH })).allowed).toBe(false);
    expect((await limiter.limit('k', policy(10), { now: EPOCH })).remaining).toBe(1);
    await limiter.close();
  });
});

interface Step {
  readonly gap: number;
  readonly cost: number;
  readonly peek: boolean;
}

const steps = (maxGap: number): fc.Arbitrary<Step[]> =>
  fc.array(
    fc.record({
      // Mostly forward, sometimes back (a clock that went back), now and then far ahead.
      gap: fc.oneof(fc.constant(0), fc.integer({ min: -60, max: 60 }), fc.integer({ min: 0, max: maxGap })),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 8 })),
      peek: fc.boolean(),
    }),
    { minLength: 1, maxLength: 50 },
  );

const policies: fc.Arbitrary<Policy> = fc
  .record({
    limit: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 1000 })),
    window: fc.oneof(fc.integer({ min: 1, max: 3_000 }), fc.constantFrom(1000, 60_000, 7, 999)),
    precision: fc.oneof(fc.constantFrom(2, 3, 4, 10, 60, 100), fc.integer({ min: 2, max: 100 })),
    softPercent: fc.constantFrom(0, 0, 10, 50),
  })
  .map(({ window, precision, ...rest }) => ({ algorithm: 'sliding-window' as const, window: Math.max(window, precision), precision, ...rest }));

describe('precision N > 1 on the memory store', () => {
  it('decides exactly as the BigInt model of the spec', async () => {
    await fc.assert(
      fc.asyncProperty(policies, steps(8_000), async (policy, trace) => {
        const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
        const model = slidingBucketsModel(policy);
        let now = EPOCH;
        for (const [index, step] of trace.entries()) {
          now += step.gap;
          const options = { now, cost: step.cost };
          const decision = step.peek ? await limiter.peek('k', policy, options) : await limiter.limit('k', policy, options);
          expect(decision, `step ${index} at ${now}, cost ${step.cost}`).toEqual({ ...model.decide(now, step.cost, !step.peek), now });
        }
        await limiter.close();
      }),
      { numRuns: 200 },
    );
  });

  it('decides wide policies (counts × window past 2^53) exactly as the model', async () => {
    const wide = fc.record({
      limit: fc.integer({ min: 200_000_000, max: 4_294_967_295 }),
      window: fc.constantFrom(86_400_000, 31_536_000_000),
      precision: fc.constantFrom(2, 10, 60, 100),
      softPercent: fc.constantFrom(0, 1000),
    });
    const trace = fc.array(fc.record({ gap: fc.oneof(fc.constant(0), fc.integer({ min: -1000, max: 20_000_000_000 })), cost: fc.integer({ min: 1, max: 2_000_000_000 }), peek: fc.boolean() }), { minLength: 1, maxLength: 20 });
    await fc.assert(
      fc.asyncProperty(wide, trace, async (fields, trace) => {
        const policy: Policy = { algorithm: 'sliding-window', ...fields };
        expect(compilePolicy(policy).wide).toBe(true);
        const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
        const model = slidingBucketsModel(policy);
        let now = EPOCH;
        for (const step of trace) {
          now += step.gap;
          const options = { now, cost: step.cost };
          const decision = step.peek ? await limiter.peek('k', policy, options) : await limiter.limit('k', policy, options);
          expect(decision).toEqual({ ...model.decide(now, step.cost, !step.peek), now });
        }
        await limiter.close();
      }),
      { numRuns: 60 },
    );
  });

  it('at N = 1 the bucket algorithm decides exactly as the two-window counter', () => {
    const plain = fc.record({ limit: fc.integer({ min: 1, max: 50 }), window: fc.integer({ min: 1, max: 5_000 }), softPercent: fc.constantFrom(0, 10, 50) });
    fc.assert(
      fc.property(plain, steps(12_000), (fields, trace) => {
        const policy = compilePolicy({ algorithm: 'sliding-window', ...fields });
        const buckets = new Float64Array(3);
        const counter = new Float64Array(3);
        let now = EPOCH;
        for (const step of trace) {
          now += step.gap;
          expect(decideSlidingBuckets(buckets, 0, now, step.cost, policy, !step.peek)).toEqual(slidingWindow.decide(counter, 0, now, step.cost, policy, !step.peek));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('gives an evicted key’s record to the next key, zeroed', async () => {
    const store = memoryStore({ maxKeys: 2, sweepIntervalMs: 0 });
    const limiter = createLimiter({ store });
    const policy: Policy = { algorithm: 'sliding-window', limit: 3, window: 60_000, precision: 10 };
    for (let key = 0; key < 50; key++) {
      for (let i = 0; i < 3; i++) expect((await limiter.limit(`k${key}`, policy, { now: EPOCH + key })).allowed).toBe(true);
      expect((await limiter.limit(`k${key}`, policy, { now: EPOCH + key })).allowed).toBe(false);
    }
    expect(store.stats()).toMatchObject({ keys: 2, evictions: 48 });
    await limiter.close();
  });
});
