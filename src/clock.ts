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

const SETTLED: Promise<void> = Promise.resolve();

/**
 * Runs `callback` at the next microtask checkpoint, as `queueMicrotask` does, by a reaction on one
 * settled promise: node's `queueMicrotask` builds an AsyncResource and a bound function per call
 * (about 2% of a hot key's time through the promise API). `callback` must not throw.
 */
export function atNextCheckpoint(callback: () => void): void {
  void SETTLED.then(callback);
}

function expire(): void {
  readsLeft = 0;
}

/** Epoch milliseconds, as `Date.now()`, shared within one synchronous run. */
export function currentTime(): number {
  if (readsLeft === 0) {
    reading = Date.now();
    atNextCheckpoint(expire);
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
