/**
 * Quotas envoy accepts (any uint32 requests_per_unit, any unit) load and count exactly with the
 * algorithms that only add counts (fixed-window, envoy's, and sliding-log), on memory, a single
 * Redis and a Redis Cluster. The algorithms that multiply counts by the window (the buckets, GCRA,
 * sliding-window) still refuse quotas whose arithmetic could round, saying which to use instead.
 */
import { describe, expect, it } from 'vitest';
import { compileRules, createLimiter, memoryStore, parseRules, type Store } from '../../src/index.js';
import { checkRules } from '../../src/rules/parse.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const redis = useRedisTopologies();
const QUOTAS = [
  ['1000000', 'year', 1],
  ['10000000', 'month', 1],
  ['1000000000', 'day', 1],
  ['4294967295', 'year', 1],
  ['4294967295', 'year', 3],
] as const;
const DAY = 86_400_000;
const UNIT_MS = { day: DAY, month: 30 * DAY, year: 365 * DAY } as const;

function rulesFor(algorithm: string): string {
  return `domain: quotas\ndescriptors:\n${QUOTAS.map(
    ([requests, unit, multiplier], i) =>
      `  - key: plan\n    value: p${i}\n    rate_limit: { unit: ${unit}, requests_per_unit: ${requests}, unit_multiplier: ${multiplier}, algorithm: ${algorithm} }\n`,
  ).join('')}`;
}

describe.each(['memory', 'redis', 'cluster'] as const)('big quotas on %s', (topology) => {
  const open = async (): Promise<Store> =>
    topology === 'memory' ? memoryStore({ sweepIntervalMs: 0 }) : redis.open(topology === 'redis' ? { url: redis.single.url } : { cluster: redis.cluster.nodes });

  it.each(['fixed-window', 'sliding-log'])('%s: each quota admits exactly its requests_per_unit in a window, and not one more', async (algorithm) => {
    const limiter = createLimiter({ store: await open(), rules: compileRules(parseRules(rulesFor(algorithm), 'quotas.yaml')) });
    for (const [index, [requests, unit, multiplier]] of QUOTAS.entries()) {
      const windowMs = UNIT_MS[unit] * multiplier;
      const start = Math.floor(1_800_000_000_000 / windowMs) * windowMs;
      const check = (hits: number, now: number) =>
        limiter.check({ domain: 'quotas', descriptors: [{ entries: [{ key: 'plan', value: `p${index}` }], hitsAddend: hits }], now });
      const limit = Number(requests);
      // Everything but one in a single request, then the last one, then one too many.
      expect((await check(limit - 1, start + 1)).statuses[0], `${requests} per ${multiplier} ${unit}`).toMatchObject({
        code: 'OK',
        limitRemaining: 1,
        currentLimit: { requestsPerUnit: limit },
      });
      expect((await check(1, start + 2)).statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
      expect((await check(1, start + 3)).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0 });
    }
    await limiter.close();
  });
});

describe('the algorithms that multiply by the window', () => {
  it.each(['token-bucket', 'leaky-bucket', 'gcra', 'sliding-window'])('%s: 4294967295 per year is refused, naming the algorithms that count it', (algorithm) => {
    const { errors } = checkRules(rulesFor(algorithm), 'quotas.yaml');
    expect(errors.length).toBeGreaterThan(0);
    expect(errors[0]!.message).toMatch(new RegExp(`too large for ${algorithm} to count exactly.*use fixed-window \\(the default\\) or sliding-log`));
  });
});
