/**
 * The figures docs/algorithms.md gives as measured, reproduced on the memory store with an explicit
 * `now` for every call: the window-edge burst, a token bucket's `burst + limit` in one window, the
 * sliding window's worst case of twice the limit, and the sliding log's exact cap in the same test.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, type AlgorithmName } from '../../src/index.js';

/** 20 s past a whole minute (docs/algorithms.md, "How to read the examples"): its minute ends at T0 + 40,000. */
const T0 = 1_700_000_000_000;
const MINUTE = 60_000;
const LAST_MS_OF_WINDOW = T0 + 40_000 - 1;

/**
 * `{ limit: 10, window: '1m' }` on a fresh key: 10 requests at `start`, then one attempt every
 * millisecond for two minutes. Returns the most admitted within one 60-second span `[t, t + 60,000)`.
 */
function mostInOneMinute(algorithm: AlgorithmName, start: number): number {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  const policy = { algorithm, limit: 10, window: '1m' } as const;
  const admitted: number[] = [];
  for (let i = 0; i < 10; i++) if (limiter.limitSync('k', policy, { now: start }).allowed) admitted.push(start);
  for (let now = start + 1; now <= start + 2 * MINUTE; now++) if (limiter.limitSync('k', policy, { now }).allowed) admitted.push(now);
  let most = 0;
  for (let last = 0, first = 0; last < admitted.length; last++) {
    while (admitted[last]! - admitted[first]! >= MINUTE) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

describe('the measured examples of docs/algorithms.md', () => {
  it('token-bucket, 10 per minute: a burst of 10 followed by an attempt every millisecond admits 19 within one 60-second span', () => {
    expect(mostInOneMinute('token-bucket', T0)).toBe(19);
  });

  it('sliding-window, 10 per minute: 10 in the last millisecond of a window, then an attempt every millisecond, admits 20 within one 60-second span', () => {
    expect(mostInOneMinute('sliding-window', LAST_MS_OF_WINDOW)).toBe(20);
  });

  it('sliding-log, 10 per minute: the same test admits exactly 10 within any 60-second span', () => {
    expect(mostInOneMinute('sliding-log', LAST_MS_OF_WINDOW)).toBe(10);
  });

  it.each([
    ['fixed-window', 10],
    ['sliding-window', 5],
    ['sliding-log', 5],
    ['token-bucket', 5],
    ['leaky-bucket', 5],
    ['gcra', 5],
  ] as const)('the window-edge burst, 5 per minute: %s admits %d of five 1 ms before a minute boundary and five on it', async (algorithm, expected) => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy = { algorithm, limit: 5, window: '1m' } as const;
    let admitted = 0;
    for (const now of [LAST_MS_OF_WINDOW, LAST_MS_OF_WINDOW + 1]) {
      for (let i = 0; i < 5; i++) if ((await limiter.limit('k', policy, { now })).allowed) admitted += 1;
    }
    expect(admitted).toBe(expected);
  });
});
