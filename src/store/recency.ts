/**
 * The memory store's recency order: a doubly linked list through its slots, most recent at the
 * head, in two typed arrays (no object per key). Eviction reads it from the least recent end.
 */

/** No slot: the end of the list, or an empty list. */
export const NONE = -1;

export class RecencyList {
  /** Per slot: the next more recent slot (towards the head). */
  private newer: Int32Array;
  /** Per slot: the next less recent slot. */
  private older: Int32Array;
  private mostRecent = NONE;
  /** The least recently used slot, {@link NONE} when the list is empty. */
  leastRecent = NONE;

  /** Room for slots numbered below `slots`. */
  constructor(slots: number) {
    this.newer = new Int32Array(slots);
    this.older = new Int32Array(slots);
  }

  /** How many slots the list has room for. */
  get capacity(): number {
    return this.newer.length;
  }

  /** The slot used next more recently than `slot`, or {@link NONE}. */
  newerThan(slot: number): number {
    return this.newer[slot]!;
  }

  /** Moves a listed `slot` to the head. */
  touch(slot: number): void {
    if (slot === this.mostRecent) return;
    this.unlink(slot);
    this.add(slot);
  }

  /** Lists `slot`, not listed yet, as the most recent. */
  add(slot: number): void {
    this.newer[slot] = NONE;
    this.older[slot] = this.mostRecent;
    if (this.mostRecent !== NONE) this.newer[this.mostRecent] = slot;
    this.mostRecent = slot;
    if (this.leastRecent === NONE) this.leastRecent = slot;
  }

  /** Takes a listed `slot` out of the list. */
  unlink(slot: number): void {
    const newer = this.newer[slot]!;
    const older = this.older[slot]!;
    if (newer !== NONE) this.older[newer] = older;
    else this.mostRecent = older;
    if (older !== NONE) this.newer[older] = newer;
    else this.leastRecent = newer;
  }

  /** Makes room for slots numbered below `slots`. */
  grow(slots: number): void {
    this.newer = grown(this.newer, slots);
    this.older = grown(this.older, slots);
  }
}

/** `source` copied into a larger array of `slots` entries. */
function grown(source: Int32Array, slots: number): Int32Array {
  const target = new Int32Array(slots);
  target.set(source);
  return target;
}
