/**
 * The guard around a store the test writes itself (the `Store` interface is public, so a custom
 * store is an ordinary use), through the public `createLimiter`, on a controlled clock: a store
 * call that never settles holds its place among the calls in flight only until its deadline, and
 * calls past `maxInFlight` are shed by the failure mode without telling the breaker the store failed.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore, type CompiledPolicy, type Decision, type Policy, type Store } from '../../../src/index.js';
import type { BreakerTransition } from '../../../src/limiter/breaker.js';

const T0 = 1_700_000_000_000;
const HOURLY: Policy = { algorithm: 'fixed-window', limit: 100, window: '1h' };

/** A store deciding on a memory store, each `consume` answered after `delayMs`, or never while `hang`. */
function testStore(): Store & { hang: boolean; delayMs: number; calls: number } {
  const inner = memoryStore({ sweepIntervalMs: 0 });
  const later = <T>(answer: () => T): Promise<T> => new Promise((resolve) => setTimeout(() => resolve(answer()), store.delayMs));
  const store = {
    name: 'custom',
    hang: false,
    delayMs: 0,
    calls: 0,
    consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
      store.calls += 1;
      return store.hang ? new Promise<Decision>(() => undefined) : later(() => inner.consume(key, policy, cost, now));
    },
    peek: (key: string, policy: CompiledPolicy, cost: number, now: number | undefined) => later(() => inner.peek(key, policy, cost, now)),
    consumeAll: (requests: Parameters<Store['consumeAll']>[0], now: number | undefined, commit: boolean) => later(() => inner.consumeAll(requests, now, commit)),
    reset: (key: string, policy: CompiledPolicy) => inner.reset(key, policy),
    resetPrefix: (prefix: string) => inner.resetPrefix(prefix),
    close: () => inner.close(),
  };
  return store;
}

/** A limiter on a {@link testStore} (deadline 10 ms, failure mode closed) and the breaker transitions it announces. */
function watched(clock: () => number) {
  const store = testStore();
  const limiter = createLimiter({ store, clock, deadlineMs: 10, failureMode: 'closed' });
  const transitions: BreakerTransition[] = [];
  limiter.onTransition((transition) => transitions.push(transition));
  return { store, limiter, transitions };
}

describe('the guard around a custom store', () => {
  it('a store call that never settles frees its place at its deadline: the breaker half-opens, probes, and closes once the store answers again (issue 26, item 7)', async () => {
    let now = T0;
    const { store, limiter, transitions } = watched(() => now);
    store.hang = true;
    // The default breaker: 5 calls past their deadline in a row open it.
    for (let i = 0; i < 5; i++) expect((await limiter.limit('k', HOURLY)).reason).toBe('fail-closed');
    expect(limiter.health()).toMatchObject({ breaker: 'open', inFlight: 0, fallbacks: { timeout: 5, 'breaker-open': 0, overload: 0 } });
    // The store answers again; after the open period (200 ms) 3 probes go out, one at a time.
    store.hang = false;
    now += 200;
    const probes = [];
    for (let i = 0; i < 3; i++) probes.push(await limiter.limit('k', HOURLY));
    expect(probes.map((d) => [d.allowed, d.reason])).toEqual([[true, undefined], [true, undefined], [true, undefined]]);
    expect(transitions.map((t) => t.to)).toEqual(['open', 'half-open', 'closed']);
    const after = await limiter.limit('k', HOURLY);
    expect([after.allowed, after.reason, after.remaining]).toEqual([true, undefined, HOURLY.limit - 4]);
    expect(limiter.health()).toMatchObject({ breaker: 'closed', inFlight: 0 });
    expect(store.calls).toBe(9);
  });

  it('a call that never settles holds no place among maxInFlight past its deadline (issue 26, item 7)', async () => {
    const store = testStore();
    const limiter = createLimiter({ store, clock: () => T0, deadlineMs: 10, maxInFlight: 2, breaker: false, failureMode: 'open' });
    store.hang = true;
    for (let i = 0; i < 4; i++) expect((await limiter.limit('k', HOURLY)).reason).toBe('fail-open');
    expect(limiter.health()).toMatchObject({ inFlight: 0, fallbacks: { timeout: 4, overload: 0 } });
    store.hang = false;
    expect((await limiter.limit('k', HOURLY)).reason).toBeUndefined();
  });

  it('overload is shed without calling the store unhealthy: past maxInFlight the failure mode answers (cause overload) and the breaker stays closed (issue 26, item 8)', async () => {
    const store = testStore();
    // A store that answers slowly but correctly.
    store.delayMs = 20;
    const limiter = createLimiter({ store, clock: () => T0, deadlineMs: 1_000, maxInFlight: 2, failureMode: 'open' });
    const transitions: BreakerTransition[] = [];
    limiter.onTransition((transition) => transitions.push(transition));
    const decisions = await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k', HOURLY)));
    expect(decisions.map((d) => d.reason)).toEqual([undefined, undefined, ...Array<string>(8).fill('fail-open')]);
    expect(limiter.health()).toMatchObject({ breaker: 'closed', inFlight: 0, lastFailureAt: undefined, fallbacks: { timeout: 0, error: 0, 'breaker-open': 0, overload: 8 } });
    expect(transitions).toEqual([]);
    // Twice more, so well past the 5 that would open it were they failures: still closed, and the
    // store still decides the calls within the bound.
    for (let round = 0; round < 2; round++) await Promise.all(Array.from({ length: 10 }, () => limiter.limit('k', HOURLY)));
    expect(limiter.health()).toMatchObject({ breaker: 'closed', fallbacks: { overload: 24, 'breaker-open': 0 } });
    expect(transitions).toEqual([]);
    const after = await limiter.limit('k', HOURLY);
    expect([after.reason, after.remaining]).toEqual([undefined, HOURLY.limit - 7]);
    expect(store.calls).toBe(7);
  });

  it('the breaker probes only once every earlier call has settled or passed its deadline, one probe at a time', async () => {
    let now = T0;
    const { store, limiter, transitions } = watched(() => now);
    // Out while the breaker opens: a call that never settles (deadline 300 ms) and a slow one that
    // settles at 600 ms (deadline 2 s); 5 calls past their 10 ms deadline open the breaker.
    store.hang = true;
    const hung = limiter.limit('hung', HOURLY, { deadlineMs: 300 });
    store.hang = false;
    store.delayMs = 600;
    const slow = limiter.limit('slow', HOURLY, { deadlineMs: 2_000 });
    await Promise.all(Array.from({ length: 5 }, () => limiter.limit('trip', HOURLY)));
    expect(limiter.health()).toMatchObject({ breaker: 'open', inFlight: 2 });
    now += 200; // the open period is over, but no probe goes while earlier calls are out
    const sent = store.calls;
    const refused = async (): Promise<void> => {
      expect((await limiter.limit('k', HOURLY)).reason).toBe('fail-closed');
      expect(store.calls).toBe(sent);
    };
    await refused();
    expect((await hung).reason).toBe('fail-closed'); // its deadline passed: its place is free
    expect(limiter.health().inFlight).toBe(1);
    await refused(); // the slow one is still out
    expect(await slow).toMatchObject({ allowed: true, remaining: HOURLY.limit - 1 });
    expect(limiter.health()).toMatchObject({ breaker: 'open', inFlight: 0 });
    // Every earlier call settled: a probe goes, and while it is out the failure mode answers the rest.
    store.delayMs = 0;
    const probe = limiter.limit('k', HOURLY);
    expect((await limiter.limit('k', HOURLY)).reason).toBe('fail-closed');
    expect(store.calls).toBe(sent + 1);
    const probes = [await probe, await limiter.limit('k', HOURLY), await limiter.limit('k', HOURLY)];
    expect(probes.map((d) => [d.allowed, d.reason])).toEqual([[true, undefined], [true, undefined], [true, undefined]]);
    expect(transitions.map((t) => t.to)).toEqual(['open', 'half-open', 'closed']);
    expect(store.calls).toBe(sent + 3);
  });
});
