/**
 * `retryAfter` in check statuses: on a denied limit, the wait after the decision's `now` that is
 * enough for the same hits to pass (`Decision.retryAfter`), for each algorithm family on the memory
 * store with a controlled `now`. For a bucket it is one refill, far shorter than `durationUntilReset`
 * (the bucket full again): what a caller that retries (the gateway's drain worker) must wait.
 */
import { describe, expect, it } from 'vitest';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';
import { createLimiter, memoryStore } from '../../src/index.js';

const NOW = Date.UTC(2030, 0, 1, 0, 0, 30);
const ALGORITHMS: readonly { algorithm: string; extra: string }[] = [
  { algorithm: 'fixed-window', extra: '' },
  { algorithm: 'sliding-window', extra: '' },
  { algorithm: 'sliding-log', extra: '' },
  { algorithm: 'token-bucket', extra: ', burst: 5' },
  { algorithm: 'leaky-bucket', extra: ', burst: 5' },
  { algorithm: 'gcra', extra: ', burst: 5' },
];

describe.each(ALGORITHMS)('$algorithm', ({ algorithm, extra }) => {
  const rules = `domain: api
descriptors:
  - { key: user, rate_limit: { unit: minute, requests_per_unit: 60, algorithm: ${algorithm}${extra} } }
`;
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(rules, 'rules.yaml')) });
  const check = (now: number) => limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: algorithm }] }], now });

  it('a denied status carries retryAfter, and waiting exactly that long is enough', async () => {
    let status = (await check(NOW)).statuses[0]!;
    expect(status.code).toBe('OK');
    expect(status.retryAfter).toBeUndefined();
    let spent = 1;
    while (status.code === 'OK' && spent < 100) {
      status = (await check(NOW)).statuses[0]!;
      spent += 1;
    }
    expect(status.code).toBe('OVER_LIMIT');
    expect(status.retryAfter).toBeGreaterThan(0);
    expect(status.retryAfter).toBeLessThanOrEqual(status.durationUntilReset);
    expect((await check(NOW + status.retryAfter!)).statuses[0]!.code).toBe('OK');
    if (extra !== '') {
      // A bucket of 5 refilling one a second: the next request waits a second, the bucket five.
      expect(status.retryAfter).toBeLessThanOrEqual(1_000);
      expect(status.durationUntilReset).toBeGreaterThanOrEqual(4 * status.retryAfter!);
    }
  });
});
