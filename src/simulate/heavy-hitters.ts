/**
 * The busiest keys of a stream in bounded memory: Space-Saving (Metwally, Agrawal, El Abbadi,
 * 2005). It tracks at most `capacity` keys; a new key when full replaces the one with the smallest
 * count and inherits that count (+1), remembered as its `error`. So a reported count is at most
 * `error` too high, never too low, and any key seen more than (total / capacity) times is tracked.
 * The smallest count is found with a min-heap: counts only grow, so each hit is one sift down.
 */
import type { TopKey } from './types.js';

interface Slot {
  key: string;
  count: number;
  error: number;
  /** Position in the heap. */
  index: number;
}

export class HeavyHitters {
  private readonly slots = new Map<string, Slot>();
  private readonly heap: Slot[] = [];

  constructor(private readonly capacity: number) {}

  /** Counts one occurrence of `key`. */
  add(key: string): void {
    const slot = this.slots.get(key);
    if (slot !== undefined) {
      slot.count += 1;
      this.siftDown(slot.index);
      return;
    }
    if (this.heap.length < this.capacity) {
      const added: Slot = { key, count: 1, error: 0, index: this.heap.length };
      this.heap.push(added);
      this.slots.set(key, added);
      this.siftUp(added.index);
      return;
    }
    const smallest = this.heap[0]!;
    this.slots.delete(smallest.key);
    smallest.key = key;
    smallest.error = smallest.count;
    smallest.count += 1;
    this.slots.set(key, smallest);
    this.siftDown(0);
  }

  /** The `n` keys with the highest counts, highest first (ties by key, for a stable report). */
  top(n: number): TopKey[] {
    return [...this.heap]
      .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
      .slice(0, n)
      .map(({ key, count, error }) => ({ key, count, error }));
  }

  private siftDown(index: number): void {
    const heap = this.heap;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && heap[right]!.count < heap[left]!.count ? right : left;
      if (heap[child]!.count >= heap[index]!.count) return;
      this.swap(index, child);
      index = child;
    }
  }

  private siftUp(index: number): void {
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (this.heap[parent]!.count <= this.heap[index]!.count) return;
      this.swap(index, parent);
      index = parent;
    }
  }

  private swap(a: number, b: number): void {
    const first = this.heap[a]!;
    const second = this.heap[b]!;
    this.heap[a] = second;
    this.heap[b] = first;
    first.index = b;
    second.index = a;
  }
}
