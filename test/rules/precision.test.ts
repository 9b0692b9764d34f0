/**
 * `precision` under `rate_limit` (sliding-window's buckets per window) reaches the limiter: a rule
 * with precision 10 counts in ten buckets, on a state of its own. (Refusals: test/rules/parse.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { parseRules } from '../../src/rules/parse/index.js';
import { compileRules } from '../../src/rules/ruleset.js';

const rules = (precision: string): string => `domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, algorithm: sliding-window${precision} }
`;

describe('rules: precision', () => {
  it('is read under rate_limit and decides with that many buckets', async () => {
    const [domain] = parseRules(rules(', precision: 10'), 'api.yaml');
    expect(domain!.descriptors[0]!.rateLimit!.precision).toBe(10);
    const check = async (yaml: string): Promise<number> => {
      let now = 1_700_000_040_000; // a whole minute: its first bucket of 6 s
      const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(yaml, 'api.yaml'), [yaml]), clock: () => now });
      const request = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] };
      // 10 in the minute's first 6 s, then one at 66 s: the two-window counter still weighs 9 of
      // the 10 (⌊10 × 54/60⌋); ten buckets of 6 s have let that bucket go whole.
      for (let i = 0; i < 10; i++) await limiter.check(request);
      now += 66_000;
      const later = await limiter.check(request);
      await limiter.close();
      return later.statuses[0]!.limitRemaining;
    };
    expect(await check(rules(', precision: 10'))).toBe(9);
    expect(await check(rules(''))).toBe(0);
  });
});
