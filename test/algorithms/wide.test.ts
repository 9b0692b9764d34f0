/**
 * The wide arithmetic (docs/semantics.md, "Wide policies"):
 *  - mulDivmod is exact against BigInt, near 2^53 included;
 *  - forced onto policies that fit the plain arithmetic, the wide path of token-bucket,
 *    leaky-bucket, gcra and sliding-window gives the very same decisions over random traffic;
 *  - a key switched back and forth between the plain and the wide state encoding (same numbers)
 *    decides as if it had stayed plain: each reads the other's state exactly;
 *  - on truly wide policies (uint32 quotas over days to decades, bursts and softPercent to the
 *    top of their ranges) every decision equals a BigInt model of docs/semantics.md.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mulDivmod } from '../../src/algorithms/integer.js';
import { createLimiter, memoryStore, type Decision, type Policy } from '../../src/index.js';
import { compilePolicy, compilePolicyForcingWide, type CompiledPolicy } from '../../src/policy.js';
import { levelModel, slidingWindowModel } from '../support/reference-model.js';

const EPOCH = 1_700_000_000_000;
const MAX = Number.MAX_SAFE_INTEGER;

function reference(a: number, b: number, m: number): [number, number] {
  const product = BigInt(a) * BigInt(b);
  return [Number(product / BigInt(m)), Number(product % BigInt(m))];
}

describe('mulDivmod', () => {
  const safe = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 2 ** 32 }), fc.integer({ min: 0, max: MAX }), fc.integer({ min: MAX - 1000, max: MAX }));
  const modulus = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 1, max: 2 ** 52 - 1 }), fc.integer({ min: 2 ** 52 - 1000, max: 2 ** 52 - 1 }));

  it('equals BigInt wherever the quotient is below 2^53', () => {
    fc.assert(
      fc.property(safe, safe, modulus, (a, b, m) => {
        const expected = reference(a, b, m);
        fc.pre(expected[0] <= MAX);
        expect(mulDivmod(a, b, m)).toEqual(expected);
      }),
      { numRuns: 20_000 },
    );
  });

  it('is exact at the edges', () => {
    const values = [0, 1, 2, 3, 2 ** 26, 2 ** 32 - 1, 2 ** 32, 2 ** 51, 2 ** 52 - 1, MAX - 1, MAX, 86_400_000, 31_536_000_000, 4_294_967_295];
    for (const a of values) {
      for (const b of values) {
        for (const m of [1, 2, 3, 7, 1000, 4_294_967_295, 31_536_000_000, 2 ** 51 - 1, 2 ** 51, 2 ** 52 - 1]) {
          const expected = reference(a, b, m);
          if (expected[0] <= MAX) expect(mulDivmod(a, b, m), `${a} × ${b} / ${m}`).toEqual(expected);
        }
      }
    }
  });
});

interface Step {
  readonly gap: number;
  readonly cost: number;
  readonly peek: boolean;
  readonly wide: boolean;
}

const WIDE_ALGORITHMS = ['token-bucket', 'leaky-bucket', 'gcra', 'sliding-window'] as const;

function arbitraryPolicy(algorithm: (typeof WIDE_ALGORITHMS)[number]): fc.Arbitrary<Policy> {
  return fc.record({
    algorithm: fc.constant(algorithm),
    limit: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 100_000 })),
    window: fc.oneof(fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 1, max: 100_000_000 })),
    burst: fc.oneof(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 100_000 })),
    softPercent: fc.constantFrom(0, 0, 10, 50, 1000),
  });
}

function arbitrarySteps(): fc.Arbitrary<Step[]> {
  return fc.array(
    fc.record({
      // Mostly forward, sometimes back (a clock that went back), now and then far ahead.
      gap: fc.oneof(fc.constant(0), fc.integer({ min: -50, max: 50 }), fc.integer({ min: 0, max: 6_000 }), fc.integer({ min: 0, max: 100_000_000 })),
      cost: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 200_000 })),
      peek: fc.boolean(),
      wide: fc.boolean(),
    }),
    { minLength: 1, maxLength: 60 },
  );
}

async function play(steps: readonly Step[], policyFor: (step: Step) => CompiledPolicy): Promise<Decision[]> {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  const decisions: Decision[] = [];
  let now = EPOCH;
  for (const step of steps) {
    now += step.gap;
    const options = { now, cost: step.cost };
    const policy = policyFor(step);
    decisions.push(await (step.peek ? limiter.peek('k', policy, options) : limiter.limit('k', policy, options)));
  }
  await limiter.close();
  return decisions;
}

describe.each(WIDE_ALGORITHMS)('%s: the wide arithmetic on plain policies', (algorithm) => {
  it('decides exactly as the plain arithmetic', async () => {
    await fc.assert(
      fc.asyncProperty(arbitraryPolicy(algorithm), arbitrarySteps(), async (policy, steps) => {
        const plain = compilePolicy(policy);
        fc.pre(!plain.wide);
        const wide = compilePolicyForcingWide(policy);
        expect(wide.wide).toBe(true);
        expect(await play(steps, () => wide)).toEqual(await play(steps, () => plain));
      }),
      { numRuns: 400 },
    );
  });

  it('reads the other encoding exactly: switching a key between them changes no decision', async () => {
    await fc.assert(
      fc.asyncProperty(arbitraryPolicy(algorithm), arbitrarySteps(), async (policy, steps) => {
        const plain = compilePolicy(policy);
        fc.pre(!plain.wide);
        const wide = compilePolicyForcingWide(policy);
        expect(await play(steps, (step) => (step.wide ? wide : plain))).toEqual(await play(steps, () => plain));
      }),
      { numRuns: 300 },
    );
  });
});

const DAY = 86_400_000;

function arbitraryWidePolicy(algorithm: (typeof WIDE_ALGORITHMS)[number]): fc.Arbitrary<Policy> {
  const uint32 = fc.oneof(fc.integer({ min: 1, max: 4_294_967_295 }), fc.constant(4_294_967_295), fc.integer({ min: 1_000_000, max: 100_000_000 }));
  return fc.record({
    algorithm: fc.constant(algorithm),
    limit: uint32,
    window: fc.oneof(fc.constantFrom(DAY, 30 * DAY, 365 * DAY, 3650 * DAY), fc.integer({ min: DAY, max: 3650 * DAY })),
    burst: uint32,
    softPercent: fc.constantFrom(0, 10, 1000),
  });
}

describe.each(WIDE_ALGORITHMS)('%s: wide policies against a BigInt model of the spec', (algorithm) => {
  it('every decision equals the model', async () => {
    await fc.assert(
      fc.asyncProperty(
        arbitraryWidePolicy(algorithm),
        fc.array(
          fc.record({
            gap: fc.oneof(fc.constant(0), fc.integer({ min: -20, max: 20 }), fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 0, max: 400 * DAY })),
            // Costs from 1 to past the capacity, with the capacity itself likely.
            cost: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 50_000_000_000 }), fc.constant(-1)),
            peek: fc.boolean(),
          }),
          { minLength: 1, maxLength: 40 },
        ),
        async (policy, steps) => {
          let compiled: CompiledPolicy;
          try {
            compiled = compilePolicy(policy);
          } catch {
            // Past the bound that remains (a bucket that takes over 2^51 ms to fill): policy-checks.test.ts.
            return fc.pre(false);
          }
          fc.pre(compiled.wide);
          const model = algorithm === 'sliding-window' ? slidingWindowModel(policy) : levelModel(policy);
          const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
          let now = EPOCH;
          for (const [index, step] of steps.entries()) {
            now += step.gap;
            const cost = step.cost === -1 ? compiled.capacity : step.cost;
            const decision = await (step.peek ? limiter.peek('k', compiled, { now, cost }) : limiter.limit('k', compiled, { now, cost }));
            expect(decision, `step ${index}`).toEqual({ ...model.decide(now, cost, !step.peek), now });
          }
          await limiter.close();
        },
      ),
      { numRuns: 300 },
    );
  });
});
