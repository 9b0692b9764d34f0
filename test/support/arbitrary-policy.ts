/**
 * Random policies for the property tests (fast-check): `L` 1–20, `W` 1–5,000 ms, `B` 1–30,
 * `S` ∈ {0, 10, 50}, first-hit and aligned fixed windows, `countRejected` sliding logs, sliding
 * windows of precision 1–60 (at most `W`).
 */
import fc from 'fast-check';
import type { AlgorithmName, Policy } from '../../src/index.js';

export function arbitraryPolicy(algorithm: AlgorithmName): fc.Arbitrary<Policy> {
  return fc.record({
    algorithm: fc.constant(algorithm),
    limit: fc.integer({ min: 1, max: 20 }),
    window: fc.integer({ min: 1, max: 5_000 }),
    burst: fc.integer({ min: 1, max: 30 }),
    softPercent: fc.constantFrom(0, 0, 10, 50),
    ...(algorithm === 'sliding-log' ? { countRejected: fc.boolean() } : {}),
    ...(algorithm === 'fixed-window' ? { windowStart: fc.constantFrom('aligned' as const, 'first-hit' as const) } : {}),
    ...(algorithm === 'sliding-window' ? { precision: fc.constantFrom(1, 1, 2, 4, 10, 60) } : {}),
  }).map((policy) => (policy.precision === undefined ? policy : { ...policy, precision: Math.min(policy.precision, policy.window) }));
}
