/**
 * The circuit breaker's state machine on a controlled clock: what opens it (consecutive failures,
 * an error rate over its window), how long it stays open, how it probes and closes, and its
 * settings' validation.
 */
import { describe, expect, it } from 'vitest';
import { CircuitBreaker, type BreakerOptions, type BreakerTransition } from '../../../src/limiter/breaker.js';
import { InvalidOptionError } from '../../../src/index.js';

function breaker(options: BreakerOptions = {}) {
  let now = 1_000_000;
  const transitions: BreakerTransition[] = [];
  const b = new CircuitBreaker(options, () => now, (t) => transitions.push(t));
  return {
    b,
    transitions,
    advance: (ms: number) => {
      now += ms;
    },
    call: (ok: boolean) => {
      if (!b.allow()) return 'refused';
      if (ok) b.success();
      else b.failure('boom');
      return 'sent';
    },
  };
}

describe('circuit breaker', () => {
  it('opens after failureThreshold consecutive failures; a success in between resets the run', () => {
    const { b, call, transitions } = breaker({ failureThreshold: 3 });
    call(false);
    call(false);
    call(true);
    call(false);
    call(false);
    expect(b.state).toBe('closed');
    call(false);
    expect(b.state).toBe('open');
    expect(transitions).toEqual([expect.objectContaining({ from: 'closed', to: 'open', cause: expect.stringMatching(/^3 consecutive failures, the last: boom/) })]);
    expect(call(true)).toBe('refused');
  });

  it('opens when the error rate over the window passes errorRate, once minimumCalls are in', () => {
    const { b, call } = breaker({ failureThreshold: 1_000, errorRate: 0.5, minimumCalls: 10, windowMs: 10_000 });
    for (let i = 0; i < 4; i++) {
      call(true);
      call(false);
    }
    expect(b.state).toBe('closed'); // 8 calls: below minimumCalls
    call(true);
    call(false);
    expect(b.state).toBe('open'); // 5 of 10
  });

  it('forgets failures older than its window', () => {
    const { b, call, advance } = breaker({ failureThreshold: 1_000, errorRate: 0.5, minimumCalls: 4, windowMs: 1_000 });
    call(false);
    call(false);
    call(false);
    advance(1_500);
    call(true);
    call(true);
    call(true);
    call(false);
    expect(b.state).toBe('closed'); // 1 of 4 in the window
  });

  it('half-opens after openMs, lets halfOpenProbes probes out, closes when they all succeed', () => {
    const { b, call, advance, transitions } = breaker({ failureThreshold: 1, openMs: 200, halfOpenProbes: 2 });
    call(false);
    advance(199);
    expect(b.allow()).toBe(false);
    advance(1);
    expect(b.allow()).toBe(true);
    expect(b.state).toBe('half-open');
    expect(b.allow()).toBe(true);
    expect(b.allow()).toBe(false); // both probes are out
    b.success();
    expect(b.state).toBe('half-open');
    b.success();
    expect(b.state).toBe('closed');
    expect(transitions.map((t) => t.to)).toEqual(['open', 'half-open', 'closed']);
    expect(call(true)).toBe('sent');
  });

  it('a failed probe opens it again for another openMs', () => {
    const { b, call, advance } = breaker({ failureThreshold: 1, openMs: 100 });
    call(false);
    advance(100);
    expect(call(false)).toBe('sent');
    expect(b.state).toBe('open');
    advance(99);
    expect(b.allow()).toBe(false);
    advance(1);
    expect(b.allow()).toBe(true);
  });

  it('a permit given back (release: the call was shed, never sent) counts neither as a success nor as a failure (issue 26, item 8)', () => {
    const { b, call, advance, transitions } = breaker({ failureThreshold: 2, openMs: 100, halfOpenProbes: 1 });
    call(false);
    expect(b.allow()).toBe(true);
    b.release();
    expect(b.state).toBe('closed'); // not the second failure in a row
    call(false);
    expect(b.state).toBe('open');
    advance(100);
    expect(b.allow()).toBe(true); // the one probe
    expect(b.allow()).toBe(false);
    b.release();
    expect(b.state).toBe('half-open');
    expect(call(true)).toBe('sent'); // the probe's place was given back
    expect(transitions.map((t) => t.to)).toEqual(['open', 'half-open', 'closed']);
  });

  it.each([
    [{ failureThreshold: 0 }, /breaker.failureThreshold must be a whole number from 1/],
    [{ errorRate: 0 }, /breaker.errorRate must be a share above 0 and at most 1/],
    [{ errorRate: 1.5 }, /breaker.errorRate/],
    [{ openMs: -1 }, /breaker.openMs/],
    [{ halfOpenProbes: 1.5 }, /breaker.halfOpenProbes/],
    [{ windowMs: 5 }, /breaker.windowMs must be a whole number from 10/],
    [{ failureTreshold: 3 }, /unknown breaker option "failureTreshold"/],
  ])('%j is refused', (options, message) => {
    expect(() => breaker(options as BreakerOptions)).toThrow(InvalidOptionError);
    expect(() => breaker(options as BreakerOptions)).toThrow(message);
  });
});
