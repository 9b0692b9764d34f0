/**
 * The deadlines of a guard's store calls on one shared timer, instead of a timer set and cleared
 * per call (a Node timer costs a list insert and removal each time, measured at ~4 µs of a lone
 * Redis decision's ~130). Calls with the same deadline are due in the order they were made, so each
 * deadline has a queue and only the queues' heads are ever looked at. A settled call is only
 * marked; it leaves its queue when it reaches the head. The timer is armed for the earliest head
 * and keeps the process alive only while a call is out (as the per-call timers did).
 */

/** A call's place among the deadlines: {@link Deadlines.settle} it when the call answers first. */
export interface DeadlineEntry {
  readonly due: number;
  /** Called (in a setImmediate after the timer, see {@link Deadlines.add}) if the deadline passes first; undefined once settled. */
  expire: (() => void) | undefined;
}

/** Timers may fire a little before the instant measured by performance.now(): this much early still counts as due. */
const SLACK_MS = 1;

export class Deadlines {
  /** Entries by deadline length, each in due order; `heads` is where each queue starts. */
  private readonly queues = new Map<number, DeadlineEntry[]>();
  private readonly heads = new Map<number, number>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timerDue = Infinity;
  /** Entries added and not yet settled or expired. */
  private live = 0;

  /**
   * `expire` runs once `deadlineMs` has passed unless the entry is settled first. As before, it runs
   * in a setImmediate after the timer: timers run before I/O in each turn of the event loop, so after
   * a stall (a busy CPU, a GC pause) a reply already waiting on the socket would lose to its own
   * timer; checking once the I/O phase has run charges the store only for its own lateness.
   */
  add(deadlineMs: number, expire: () => void): DeadlineEntry {
    const entry: DeadlineEntry = { due: performance.now() + deadlineMs, expire };
    let queue = this.queues.get(deadlineMs);
    if (queue === undefined) {
      queue = [];
      this.queues.set(deadlineMs, queue);
      this.heads.set(deadlineMs, 0);
    }
    this.dropSettled(deadlineMs, queue);
    queue.push(entry);
    this.live += 1;
    if (this.live === 1) this.timer?.ref();
    if (entry.due < this.timerDue) this.arm(entry.due);
    return entry;
  }

  /** The call answered before its deadline. */
  settle(entry: DeadlineEntry): void {
    if (entry.expire === undefined) return;
    entry.expire = undefined;
    this.live -= 1;
    // Nothing out: the armed timer must not hold the process open.
    if (this.live === 0) this.timer?.unref();
  }

  private arm(due: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => this.fire(), Math.max(0, Math.ceil(due - performance.now())));
    if (this.live === 0) this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.timerDue = Infinity;
    const now = performance.now() + SLACK_MS;
    let next = Infinity;
    for (const [deadlineMs, queue] of this.queues) {
      let head = this.dropSettled(deadlineMs, queue);
      while (head < queue.length && queue[head]!.due <= now) {
        const expire = queue[head]!.expire;
        head += 1;
        if (expire === undefined) continue;
        this.settle(queue[head - 1]!);
        setImmediate(expire);
      }
      head = this.compact(deadlineMs, queue, head);
      // The first entry left is due later; a settled one there only re-arms early, harmlessly.
      if (head < queue.length) next = Math.min(next, queue[head]!.due);
    }
    if (next !== Infinity) this.arm(next);
  }

  /** Drops settled entries from the head of a queue; returns the new head. */
  private dropSettled(deadlineMs: number, queue: DeadlineEntry[]): number {
    let head = this.heads.get(deadlineMs)!;
    while (head < queue.length && queue[head]!.expire === undefined) head += 1;
    return this.compact(deadlineMs, queue, head);
  }

  /** Records the head, shrinking the array once its dropped part is the larger. */
  private compact(deadlineMs: number, queue: DeadlineEntry[], head: number): number {
    if (head === queue.length) {
      queue.length = 0;
      head = 0;
    } else if (head > 64 && head * 2 > queue.length) {
      queue.splice(0, head);
      head = 0;
    }
    this.heads.set(deadlineMs, head);
    return head;
  }
}
