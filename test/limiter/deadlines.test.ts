import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Deadlines } from '../../src/limiter/deadlines.js';

// A controlled clock: the timers, setImmediate and performance.now() move only when the test says.
const waitFor = (ms: number): Promise<unknown> => vi.advanceTimersByTimeAsync(ms);

describe('deadlines on one shared timer', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('expire each unsettled call once its own deadline passes, and never a settled one, whatever the mix of deadlines', async () => {
    const deadlines = new Deadlines();
    const expired: string[] = [];
    const started = performance.now();
    const at = new Map<string, number>();
    const add = (name: string, ms: number) =>
      deadlines.add(ms, () => {
        expired.push(name);
        at.set(name, performance.now() - started);
      });
    const settledLong = add('settled-80', 80);
    add('long-80', 80);
    add('short-20', 20);
    const settledShort = add('settled-20', 20);
    deadlines.settle(settledShort);
    deadlines.settle(settledLong);
    deadlines.settle(settledLong);
    await waitFor(50);
    expect(expired).toEqual(['short-20']);
    add('later-20', 20);
    await waitFor(120);
    expect(expired).toEqual(['short-20', 'later-20', 'long-80']);
    // Each expired at its own deadline (the shared timer's 1 ms slack at most early), never later than the next tick.
    expect(at.get('short-20')).toBeGreaterThanOrEqual(19);
    expect(at.get('short-20')).toBeLessThanOrEqual(21);
    expect(at.get('later-20')).toBeGreaterThanOrEqual(50 + 19);
    expect(at.get('later-20')).toBeLessThanOrEqual(50 + 21);
    expect(at.get('long-80')).toBeGreaterThanOrEqual(79);
    expect(at.get('long-80')).toBeLessThanOrEqual(81);
  });

  it('settle thousands of calls in turn without expiring any, the queue shrinking as they settle', async () => {
    const deadlines = new Deadlines();
    let expired = 0;
    for (let i = 0; i < 5_000; i++) deadlines.settle(deadlines.add(10, () => (expired += 1)));
    const last = deadlines.add(10, () => (expired += 1));
    await waitFor(40);
    expect(expired).toBe(1);
    deadlines.settle(last);
    expect(expired).toBe(1);
  });
});
