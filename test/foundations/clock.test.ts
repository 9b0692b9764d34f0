/**
 * The process clock as decisions read it without `now` (src/clock.ts; README "Time"): one reading
 * per synchronous run of decisions, shared by at most 256 of them, and never older than the run
 * deciding. Through the public limiter on the memory store, against the real clock: the tests
 * spin until `Date.now()` has moved past a reading, then look at the decisions' `now`.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, type Decision } from '../../src/index.js';

/** Never denies within a test: every decision is a plain one, made at the clock's reading. */
const ROOMY = { algorithm: 'token-bucket', limit: 1_000_000, window: '1h' } as const;

/** Spins (the synchronous run goes on) until the process clock reads later than `reading`. */
function spinPast(reading: number): void {
  while (Date.now() <= reading) {
    // busy: the point is to stay in the same synchronous run
  }
}

function newLimiter() {
  return createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
}

describe('the clock reading decisions share', () => {
  it('at most 256 decisions of one synchronous run share a reading: the 257th reads the clock again', () => {
    const limiter = newLimiter();
    // Three readings in a row, the clock moving past each before the next decisions.
    let reading = limiter.limitSync('k0', ROOMY).now;
    for (let round = 0; round < 3; round++) {
      spinPast(reading);
      const nows = Array.from({ length: 256 }, (_, i) => limiter.limitSync(`k${i % 7}`, ROOMY).now);
      // The reading's first decision came before the spin: 255 more share it, the next reads again.
      expect(nows.slice(0, 255), `round ${round}`).toEqual(Array(255).fill(reading));
      expect(nows[255], `round ${round}`).toBeGreaterThan(reading);
      reading = nows[255]!;
    }
  });

  it('a reading is never older than the code running: after an await, or in a later callback, a decision reads the clock again', async () => {
    const limiter = newLimiter();
    const first = limiter.limitSync('k', ROOMY);
    spinPast(first.now);
    await Promise.resolve(); // a microtask checkpoint: the run that took the reading is over
    const before = Date.now();
    expect(limiter.limitSync('k', ROOMY).now).toBeGreaterThanOrEqual(before);

    const again = limiter.limitSync('k', ROOMY);
    spinPast(again.now);
    const inCallback = await new Promise<{ before: number; decision: Decision }>((resolve) =>
      setImmediate(() => {
        const clock = Date.now();
        resolve({ before: clock, decision: limiter.limitSync('k', ROOMY) });
      }),
    );
    expect(inCallback.decision.now).toBeGreaterThanOrEqual(inCallback.before);
    // limit() (the promise) reads the same way.
    spinPast(inCallback.decision.now);
    const clock = Date.now();
    expect((await limiter.limit('k', ROOMY)).now).toBeGreaterThanOrEqual(clock);
  });

  it('a decision at an explicit now that stores a new key starts no reading: the next decision on the store\'s clock reads the clock', async () => {
    const limiter = newLimiter();
    await Promise.resolve(); // no reading of an earlier run left
    const at = Date.now();
    // A new key: the store sweeps and may evict at the time it reads, without taking a reading to share.
    limiter.limitSync('explicit', ROOMY, { now: at });
    spinPast(at);
    const before = Date.now();
    expect(limiter.limitSync('store-clock', ROOMY).now).toBeGreaterThanOrEqual(before);
  });
});
