/**
 * The wide arithmetic in Lua, on a real Redis:
 *  - mul_divmod (prelude.lua) against BigInt: a few thousand random triples and the edges near
 *    2^53, quotient below 2^53 (its contract);
 *  - random traffic over keys switched between a plain and a wide policy (same algorithm and
 *    window, another burst or limit) decides on Redis exactly as on the memory store deciding with
 *    its wide arithmetic: Redis keeps every bucket as the time it is empty (layout 2,
 *    scripts/layout.lua), as the memory store's wide state does, so a changed limit re-reads the
 *    backlog at the new rate in both (the memory store's plain token-bucket keeps it in requests);
 *  - random wide policies (uint32 quotas over days to a decade) decide on Redis as on memory, which
 *    test/algorithms/wide.test.ts holds to a BigInt model of the spec.
 * The decisions themselves are pinned by the vectors (test/vectors/*.json).
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, memoryStore, redisStore, type Decision, type Policy, type Store } from '../../../src/index.js';
import { compilePolicyForcingWide, type CompiledPolicy } from '../../../src/policy.js';
import { useRedisWithClient } from '../../support/redis-topologies.js';

const MAX = Number.MAX_SAFE_INTEGER;
const PRELUDE = readFileSync(new URL('../../../src/store/redis/scripts/prelude.lua', import.meta.url), 'utf8');
const SCRIPT = `${PRELUDE}
local out = {}
for i = 1, #ARGV, 3 do
  local q, r = mul_divmod(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = format('%d %d', q, r)
end
return out`;

const shared = useRedisWithClient();
const server = shared.server;

function reference([a, b, m]: readonly [number, number, number]): string {
  const product = BigInt(a) * BigInt(b);
  return `${product / BigInt(m)} ${product % BigInt(m)}`;
}

function triples(): [number, number, number][] {
  const edges = [0, 1, 2, 3, 2 ** 26, 2 ** 32 - 1, 2 ** 32, 2 ** 51, 2 ** 52 - 1, MAX - 1, MAX, 86_400_000, 31_536_000_000, 4_294_967_295];
  const moduli = [1, 2, 3, 7, 1000, 4_294_967_295, 31_536_000_000, 2 ** 51 - 1, 2 ** 51, 2 ** 52 - 1];
  const out: [number, number, number][] = [];
  for (const a of edges) for (const b of edges) for (const m of moduli) out.push([a, b, m]);
  const safe = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 2 ** 32 }), fc.integer({ min: 0, max: MAX }), fc.integer({ min: MAX - 1000, max: MAX }));
  const modulus = fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 1, max: 2 ** 52 - 1 }));
  out.push(...fc.sample(fc.tuple(safe, safe, modulus), { numRuns: 6000, seed: 11 }));
  return out.filter(([a, b, m]) => (BigInt(a) * BigInt(b)) / BigInt(m) <= BigInt(MAX));
}

describe('mul_divmod in Lua', () => {
  it('equals BigInt on a real Redis', async () => {
    const cases = triples();
    expect(cases.length).toBeGreaterThan(2000);
    for (let i = 0; i < cases.length; i += 500) {
      const batch = cases.slice(i, i + 500);
      const reply = (await shared.redis.eval(SCRIPT, 0, ...batch.flat().map(String))) as string[];
      expect(reply).toEqual(batch.map(reference));
    }
  });
});

const YEAR = 31_536_000_000;
const EPOCH = 1_700_000_000_000;
/** Plain, then wide: (capacity + 1) × window crosses 2^53 − 1 between the two. */
const PAIRS: readonly (readonly [Policy, Policy])[] = [
  [
    { algorithm: 'token-bucket', limit: 1_000_000, window: YEAR, burst: 100_000 },
    { algorithm: 'token-bucket', limit: 1_000_000, window: YEAR, burst: 1_000_000 },
  ],
  [
    // A remainder far above the plain limit: the wide state must still read as wide.
    { algorithm: 'token-bucket', limit: 1, window: YEAR, burst: 1_000 },
    { algorithm: 'token-bucket', limit: 4_294_967_295, window: YEAR, burst: 4_294_967_295 },
  ],
  [
    { algorithm: 'leaky-bucket', limit: 1_000_000, window: YEAR, burst: 100_000 },
    { algorithm: 'leaky-bucket', limit: 3_000_000, window: YEAR, burst: 2_000_000 },
  ],
  [
    { algorithm: 'gcra', limit: 1_000_000, window: YEAR, burst: 100_000 },
    { algorithm: 'gcra', limit: 7_000_000, window: YEAR, burst: 1_000_000 },
  ],
  [
    { algorithm: 'sliding-window', limit: 100_000, window: YEAR },
    { algorithm: 'sliding-window', limit: 1_000_000, window: YEAR },
  ],
];

async function play(store: Store, key: string, pair: readonly [Policy, Policy] | readonly [CompiledPolicy, CompiledPolicy], steps: readonly { gap: number; cost: number; wide: boolean }[]): Promise<Decision[]> {
  // A generous deadline: under load the default 50 ms falls back to a local decision, which would not compare.
  const limiter = createLimiter({ store, deadlineMs: 10_000 });
  const decisions: Decision[] = [];
  let now = EPOCH;
  for (const step of steps) {
    now += step.gap;
    decisions.push(await limiter.limit(key, pair[step.wide ? 1 : 0], { now, cost: step.cost }));
  }
  await limiter.close();
  return decisions;
}

describe('keys switched between plain and wide policies', () => {
  it.each(PAIRS.map((pair) => [`${pair[0].algorithm} ${pair[0].limit}/${pair[1].limit}`, pair] as const))('%s decides on Redis as on memory', async (_algorithm, pair) => {
    const steps = fc.sample(
      fc.array(
        fc.record({
          gap: fc.oneof(fc.constant(0), fc.integer({ min: -100, max: 100 }), fc.integer({ min: 0, max: 100_000_000 }), fc.integer({ min: 0, max: YEAR })),
          cost: fc.oneof(fc.integer({ min: 1, max: 10 }), fc.integer({ min: 1, max: 200_000 }), fc.integer({ min: 1, max: 3_000_000 })),
          wide: fc.boolean(),
        }),
        { minLength: 20, maxLength: 40 },
      ),
      { numRuns: 25, seed: 11 },
    );
    const seen = { allowed: 0, denied: 0 };
    for (const [run, sequence] of steps.entries()) {
      const key = `switch:${pair[0].algorithm}:${run}:${Date.now()}`;
      // The memory store's wide arithmetic keeps the bucket as a time, as Redis does for every policy.
      const asTime = [compilePolicyForcingWide(pair[0]), compilePolicyForcingWide(pair[1])] as const;
      const expected = await play(memoryStore({ sweepIntervalMs: 0 }), key, asTime, sequence);
      expect(await play(redisStore({ url: server.url }), key, pair, sequence), `run ${run}`).toEqual(expected);
      for (const decision of expected) seen[decision.allowed ? 'allowed' : 'denied'] += 1;
    }
    // The traffic reaches both outcomes often, not only one.
    expect(seen.allowed).toBeGreaterThan(100);
    expect(seen.denied).toBeGreaterThan(100);
  });
});

describe('random wide policies', () => {
  it.each(['token-bucket', 'leaky-bucket', 'gcra', 'sliding-window'] as const)('%s decides on Redis as on memory', async (algorithm) => {
    const uint32 = fc.oneof(fc.integer({ min: 1, max: 4_294_967_295 }), fc.constant(4_294_967_295));
    const policy = fc.record({
      algorithm: fc.constant(algorithm),
      limit: uint32,
      window: fc.integer({ min: 86_400_000, max: 10 * YEAR }),
      burst: uint32,
      softPercent: fc.constantFrom(0, 10, 1000),
    });
    const wide = policy.filter((candidate) => {
      try {
        return compilePolicy(candidate).wide;
      } catch {
        return false;
      }
    });
    const traffic = fc.array(
      fc.record({
        gap: fc.oneof(fc.constant(0), fc.integer({ min: -20, max: 20 }), fc.integer({ min: 0, max: 1_000_000 }), fc.integer({ min: 0, max: YEAR })),
        cost: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 50_000_000_000 })),
        wide: fc.constant(true),
      }),
      { minLength: 10, maxLength: 30 },
    );
    for (const [run, [chosen, sequence]] of fc.sample(fc.tuple(wide, traffic), { numRuns: 20, seed: 7 }).entries()) {
      const key = `wide:${algorithm}:${run}:${Date.now()}`;
      const pair = [chosen, chosen] as const;
      const expected = await play(memoryStore({ sweepIntervalMs: 0 }), key, pair, sequence);
      expect(await play(redisStore({ url: server.url }), key, pair, sequence), `run ${run}: ${JSON.stringify(chosen)}`).toEqual(expected);
    }
  });
});
