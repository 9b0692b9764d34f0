/**
 * The process clock, read at most once per synchronous run of decisions. `Date.now()` costs ~40 ns
 * on virtual machines, as much as a whole decision; decisions issued together in one synchronous
 * run (a batch, a burst of requests handled in one tick) share one reading. The reading is dropped
 * at the next microtask checkpoint and after {@link READS_PER_CLOCK} uses, so it is never older than
 * the synchronous run that took it, nor than a few hundred decisions.
 */

const READS_PER_CLOCK = 256;
let reading = 0;
let readsLeft = 0;

function expire(): void {
  readsLeft = 0;
}

/**
 * Settled once: `.then(expire)` runs `expire` at the next microtask checkpoint for one promise
 * reaction, where node's `queueMicrotask` makes an async resource and a bound function each time
 * (~0.3 KB of garbage per call, taken once per request by the decision service; issue 32).
 */
const SETTLED = Promise.resolve();

/** Epoch milliseconds, as `Date.now()`, shared within one synchronous run. */
export function currentTime(): number {
  if (readsLeft === 0) {
    reading = Date.now();
    void SETTLED.then(expire);
  }
  readsLeft = readsLeft === 0 ? READS_PER_CLOCK - 1 : readsLeft - 1;
  return reading;
}

/**
 * The reading {@link currentTime} shares now, if this synchronous run took one and has uses left,
 * else `Date.now()`; never starts a shared reading, so a caller at an explicit time cannot hand
 * one to the store-clock decisions after it (the memory store's expiry and eviction judge by this).
 */
export function recentTime(): number {
  return readsLeft > 0 ? reading : Date.now();
}
