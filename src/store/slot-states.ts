/**
 * The memory store's state per slot: {@link STRIDE} doubles (up to three of algorithm state, then the
 * expiry time), in chunks of 2^16 slots (2 MB) once past the first, which doubles up to that size.
 *
 * Why chunks: growing adds a chunk and copies nothing. One array doubled copied all the state at each
 * doubling and touched its pages twice (the new array's, then again for the keys that filled it):
 * with the key table's growth, a fifth of the time to store a million new keys (BENCHMARKS.md, "1M
 * new keys: a probe on tags, state in chunks"). Memory also follows the keys held in 2 MB steps
 * rather than up to the next power of two. All chunks are Float64Arrays: the algorithms, which take
 * an array and an offset, see one kind of array.
 *
 * Beside the state, a lower bound of every live slot's expiry, for the store's incremental sweep:
 * until the process clock reaches it the sweep has nothing to find and reads no slot (it read two
 * slots' expiry per new key, a stream through all the state while a store fills).
 */

/** Doubles per slot. */
export const STRIDE = 4;
/** Where a slot's expiry time is, after up to 3 doubles of algorithm state. */
export const EXPIRES = 3;
/** A sliding window of precision N > 1 keeps its N + 2 doubles in a RecordArena; its slot holds the record's offset here. */
export const RECORD = 0;
const CHUNK_SHIFT = 16;
const CHUNK_SLOTS = 1 << CHUNK_SHIFT;
const CHUNK_MASK = CHUNK_SLOTS - 1;

/** Where `slot`'s doubles start in {@link SlotStates.arrayOf}(slot). */
export function offsetOf(slot: number): number {
  return (slot & CHUNK_MASK) * STRIDE;
}

export class SlotStates {
  private readonly chunks: Float64Array[];
  /** No live slot expires before this. */
  earliestExpiry = Infinity;
  /** The least expiry written, or passed by the sweep, since its hand last wrapped: {@link earliestExpiry} once it wraps again. */
  private passEarliestExpiry = Infinity;
  /** The larger of the two: an expiry written at or above it lowers neither (one comparison on a hot key's path). */
  expiryBound = Infinity;

  /** Room for slots numbered below `slots`. */
  constructor(slots: number) {
    this.chunks = [];
    this.grow(slots);
  }

  /** The array holding `slot`'s doubles, from {@link offsetOf}(slot). */
  arrayOf(slot: number): Float64Array {
    return this.chunks[slot >>> CHUNK_SHIFT]!;
  }

  /** Zeroes `slot`'s doubles (a new key's state). */
  clear(slot: number): void {
    const at = offsetOf(slot);
    this.chunks[slot >>> CHUNK_SHIFT]!.fill(0, at, at + STRIDE);
  }

  /** `slot`'s expiry: the process-clock instant its state may be reclaimed. */
  expiryOf(slot: number): number {
    return this.chunks[slot >>> CHUNK_SHIFT]![offsetOf(slot) + EXPIRES]!;
  }

  /** Makes room for slots numbered below `slots`: the first chunk doubles up to full size, later ones are added whole (or as large as `slots` needs). */
  grow(slots: number): void {
    for (let chunk = 0; chunk * CHUNK_SLOTS < slots; chunk++) {
      const length = Math.min(CHUNK_SLOTS, slots - chunk * CHUNK_SLOTS) * STRIDE;
      const held = this.chunks[chunk];
      if (held !== undefined && held.length >= length) continue;
      const grown = new Float64Array(length);
      if (held !== undefined) grown.set(held);
      this.chunks[chunk] = grown;
    }
  }

  /** Keeps the bounds at or below an expiry just written (callers compare with {@link expiryBound} first). */
  lowerExpiryBounds(expires: number): void {
    if (expires < this.earliestExpiry) this.earliestExpiry = expires;
    if (expires < this.passEarliestExpiry) this.passEarliestExpiry = expires;
    this.expiryBound = Math.max(this.earliestExpiry, this.passEarliestExpiry);
  }

  /** The sweep read a live slot expiring at `expires` and left it. */
  sweptPast(expires: number): void {
    if (expires < this.passEarliestExpiry) {
      this.passEarliestExpiry = expires;
      this.expiryBound = Math.max(this.earliestExpiry, expires);
    }
  }

  /** The sweep's hand went round: every live slot's expiry was read in that pass or written since it began. */
  sweepWrapped(): void {
    this.earliestExpiry = this.passEarliestExpiry;
    this.passEarliestExpiry = Infinity;
    this.expiryBound = Infinity;
  }
}
