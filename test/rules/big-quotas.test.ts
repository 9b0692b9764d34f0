/**
 * Quotas envoy accepts (any uint32 requests_per_unit, any unit) load and count exactly with every
 * algorithm, on memory, a single Redis and a Redis Cluster: fixed-window and sliding-log only add
 * counts; the buckets, GCRA and sliding-window switch to their wide arithmetic past 2^53
 * (docs/semantics.md). What remains refused is a bucket that would take more than 2^51 ms to fill.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS } from '../../src/algorithms/catalog.js';
import { createLimiter, memoryStore, type Store } from '../../src/index.js';
import { compileRules, parseRules } from '../../src/rules/index.js';
import { checkRules } from '../../src/rules/parse/index.js';
import { useRedisTopologies } from '../support/redis-topologies.js';

const redis = useRedisTopologies();
const QUOTAS = [
  ['1000000', 'year', 1],
  ['10000000', 'month', 1],
  ['1000000000', 'day', 1],
  ['4294967295', 'year', 1],
  ['4294967295', 'year', 3],
  ['4294967295', 'year', 10],
  ['4294967295', 'second', 1],
] as const;
const DAY = 86_400_000;
const UNIT_MS = { second: 1000, day: DAY, month: 30 * DAY, year: 365 * DAY } as const;

function rulesFor(algorithm: string): string {
  return `domain: quotas\ndescriptors:\n${QUOTAS.map(
    ([requests, unit, multiplier], i) =>
      `  - key: plan\n    value: p${i}\n    rate_limit: { unit: ${unit}, requests_per_unit: ${requests}, unit_multiplier: ${multiplier}, algorithm: ${algorithm} }\n`,
  ).join('')}`;
}

describe.each(['memory', 'redis', 'cluster'] as const)('big quotas on %s', (topology) => {
  const open = async (): Promise<Store> =>
    topology === 'memory' ? memoryStore({ sweepIntervalMs: 0 }) : redis.open(topology === 'redis' ? { url: redis.single.url } : { cluster: redis.cluster.nodes });

  it.each(ALGORITHMS)('%s: each quota admits exactly its requests_per_unit in a window, and not one more', async (algorithm) => {
    // What the store counts, not how fast: past the 50 ms default a busy machine's slow first call
    // (the functions loaded on a fresh connection) was answered by the local fallback, OVER_LIMIT.
    // 'throw': a store error (once seen here as a fallback answer at 5 s) fails with its own message.
    const limiter = createLimiter({
      store: await open(),
      rules: compileRules(parseRules(rulesFor(algorithm), 'quotas.yaml')),
      deadlineMs: 5_000,
      failureMode: 'throw',
    });
    for (const [index, [requests, unit, multiplier]] of QUOTAS.entries()) {
      const windowMs = UNIT_MS[unit] * multiplier;
      const start = Math.floor(1_800_000_000_000 / windowMs) * windowMs;
      const check = (hits: number, now: number) =>
        limiter.check({ domain: 'quotas', descriptors: [{ entries: [{ key: 'plan', value: `p${index}` }], hitsAddend: hits }], now });
      const limit = Number(requests);
      // Everything but one in a single request, then the last one, then one too many (at one
      // instant: a bucket of 4294967295 per second refills 4 in each ms).
      expect((await check(limit - 1, start + 1)).statuses[0], `${requests} per ${multiplier} ${unit}`).toMatchObject({
        code: 'OK',
        limitRemaining: 1,
        currentLimit: { requestsPerUnit: limit },
      });
      expect((await check(1, start + 1)).statuses[0]).toMatchObject({ code: 'OK', limitRemaining: 0 });
      expect((await check(1, start + 1)).statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0 });
    }
    await limiter.close();
  });
});

describe('the bound that remains', () => {
  it.each(['token-bucket', 'leaky-bucket', 'gcra'])('%s: a bucket that would take more than 2^51 ms to fill is refused, naming the bound', (algorithm) => {
    const rules = `domain: quotas\ndescriptors:\n  - key: plan\n    rate_limit: { unit: year, requests_per_unit: 1, burst: 4294967295, algorithm: ${algorithm} }\n`;
    const { errors } = checkRules(rules, 'quotas.yaml');
    expect(errors.map((error) => error.path)).toEqual(['descriptors[0].rate_limit.burst']);
    expect(errors[0]!.message).toMatch(/fills within 2251799813685248 ms.*use fixed-window \(the default\) or sliding-log/);
  });

  it.each(ALGORITHMS)('%s: 4294967295 per year with burst 4294967295 and soft_percent 1000 loads', (algorithm) => {
    const rules = `domain: quotas\ndescriptors:\n  - key: plan\n    rate_limit: { unit: year, requests_per_unit: 4294967295, burst: 4294967295, soft_percent: 1000, algorithm: ${algorithm} }\n`;
    expect(checkRules(rules, 'quotas.yaml').errors).toEqual([]);
  });
});
