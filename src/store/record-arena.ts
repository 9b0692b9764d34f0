/**
 * Fixed-width records of doubles in one growing array, with a free list: the memory store keeps a
 * sliding window's N + 2 doubles of bucket state here (N up to 100 would not fit its 4-double
 * slots), at 8 bytes a double and no object per key.
 */

const INITIAL_RECORDS = 64;

export class RecordArena {
  /** The records; replaced when it grows, so read it after {@link allocate}. */
  data: Float64Array;
  /** Records ever handed out: those below it are live or on the free list. */
  private used = 0;
  private readonly free: number[] = [];

  constructor(readonly width: number) {
    this.data = new Float64Array(width * INITIAL_RECORDS);
  }

  /** A zeroed record: its offset into {@link data}. */
  allocate(): number {
    const reused = this.free.pop();
    if (reused !== undefined) {
      this.data.fill(0, reused, reused + this.width);
      return reused;
    }
    const offset = this.used * this.width;
    if (offset + this.width > this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.used += 1;
    return offset;
  }

  /** Gives the record at `offset` back. */
  release(offset: number): void {
    this.free.push(offset);
  }
}
