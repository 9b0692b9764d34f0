/**
 * The requests of one tick, in calls by their clock (an explicit `now`, or '' for Redis TIME),
 * kept in the order they were made wherever a key is concerned. Redis applies calls in the order
 * they are sent, and callers rely on it: local-first pushes a stale view's units at their own time,
 * then asks the store to decide at the request's, and the decision must see the push. Grouped by
 * clock alone (one call per `now`, in the order each `now` first came), a push whose `now` came
 * second in the tick went after the decision: a limiter alone passed its limit by those units.
 *
 * A request joins the latest call of its clock unless a later call holds one of its keys; then it
 * starts a new call. A tick on one clock (the common case: Redis TIME) is one call, and keys are
 * only looked at once a second clock comes in.
 */
import type { Call } from './pipeline.js';
import type { Pending } from './script-call.js';

export class Tick {
  private calls: Call[] = [];
  /** The latest call of each clock. */
  private readonly latest = new Map<string, number>();
  /** Once a second call starts: the latest call holding each key. */
  private lastCallOf: Map<string, number> | undefined;

  add(timeKey: string, pending: Pending): void {
    let at = this.latest.get(timeKey);
    if (at !== this.calls.length - 1 && this.calls.length > 0) {
      this.lastCallOf ??= keysByCall(this.calls);
      const lastCallOf = this.lastCallOf;
      if (at !== undefined && pending.keys.some((key) => (lastCallOf.get(key) ?? -1) > at!)) at = undefined;
    }
    if (at === undefined) {
      at = this.calls.push({ timeKey, batch: [] }) - 1;
      this.latest.set(timeKey, at);
    }
    this.calls[at]!.batch.push(pending);
    if (this.lastCallOf !== undefined) for (const key of pending.keys) this.lastCallOf.set(key, at);
  }

  /** The tick's calls, in order; the tick starts empty again. */
  take(): Call[] {
    const calls = this.calls;
    this.calls = [];
    this.latest.clear();
    this.lastCallOf = undefined;
    return calls;
  }
}

function keysByCall(calls: readonly Call[]): Map<string, number> {
  const lastCallOf = new Map<string, number>();
  calls.forEach(({ batch }, index) => {
    for (const pending of batch) for (const key of pending.keys) lastCallOf.set(key, index);
  });
  return lastCallOf;
}
