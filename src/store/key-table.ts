/**
 * An open-addressing hash table from (state space, key) to a slot number, for the memory store.
 *
 * Why not a `Map`: on a million distinct keys a `Map` costs a lookup plus an insert per new key and
 * ~50 bytes per entry; this table takes one probe sequence, 12 bytes per key (a 4-byte bucket at
 * most half full, plus the key's 4-byte hash), and grows by re-placing stored hashes without
 * rehashing any string. Linear probing with backward-shift deletion: no tombstones, so probe
 * sequences stay short however keys come and go.
 *
 * A bucket holds the slot number in its low bits and the top bits of the key's hash (a tag) in the
 * bits the slot numbers never use (12 bits when at most 1M slots exist). A probe rejects a bucket of
 * another key by its tag alone, without reading that key's slot: a new key's lookup touches the
 * bucket array only (one cache miss on a table of millions), not one slot per occupied bucket.
 *
 * The hash is seeded per table with a random value, so colliding keys cannot be precomputed.
 */
import { randomInt } from 'node:crypto';

const EMPTY = 0;
const MIN_BUCKETS = 1024;

/** 32-bit hash of `key` in `space`: FNV-1a over UTF-16 units, then a murmur3 finaliser. */
function hashOf(key: string, space: number, seed: number): number {
  let hash = seed ^ Math.imul(space, 0x9e3779b1);
  for (let i = 0; i < key.length; i++) {
    hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  return hash ^ (hash >>> 16);
}

export class KeyTable {
  /** Per bucket: (the hash's top bits) | (slot + 1); 0 is empty. */
  private buckets = new Int32Array(MIN_BUCKETS);
  private mask = MIN_BUCKETS - 1;
  /** The low bits of a bucket that hold slot + 1; the others hold the tag. */
  private readonly slotMask: number;
  private count = 0;
  private readonly seed = randomInt(0, 2 ** 31);
  /** Per slot: its key, its state space and its hash. */
  private readonly keys: (string | undefined)[] = [];
  /** State space of each slot (store/state-spaces.ts: at most one per key held). */
  private spaces: Int32Array;
  private hashes: Int32Array;
  /** The hash computed by the last {@link find}, and its key and space: the {@link insert} that follows a miss reuses it. */
  private lastHash = 0;
  private lastHashKey: string | undefined;
  private lastHashSpace = -1;
  /** The last key found and its slot: a hot key skips hashing (checked against the slot, so never stale). */
  private lastKey: string | undefined;
  private lastSpace = -1;
  private lastSlot = -1;

  /** `slots` to start with; `maxSlots` (at most 2^30) bounds every slot number the table will hold. */
  constructor(slots: number, maxSlots = 2 ** 30) {
    this.spaces = new Int32Array(slots);
    this.hashes = new Int32Array(slots);
    // slot + 1 ≤ maxSlots fits in the low 32 − clz32(maxSlots) bits: at least 1 bit is left for the tag.
    this.slotMask = 2 ** (32 - Math.clz32(maxSlots)) - 1;
  }

  /** The slot holding `key` in `space`, or -1. */
  find(space: number, key: string): number {
    const { keys, spaces } = this;
    const recent = this.lastSlot;
    if (key === this.lastKey && space === this.lastSpace && keys[recent] === key && spaces[recent] === space) return recent;
    const hash = hashOf(key, space, this.seed);
    this.lastHash = hash;
    this.lastHashKey = key;
    this.lastHashSpace = space;
    const { buckets, mask, slotMask } = this;
    const tag = hash & ~slotMask;
    for (let bucket = hash & mask; ; bucket = (bucket + 1) & mask) {
      const entry = buckets[bucket]!;
      if (entry === EMPTY) return -1;
      // The tag first: another key's bucket is then rarely followed to its slot.
      if ((entry & ~slotMask) === tag) {
        const slot = (entry & slotMask) - 1;
        if (keys[slot] === key && spaces[slot] === space) {
          this.lastKey = key;
          this.lastSpace = space;
          this.lastSlot = slot;
          return slot;
        }
      }
    }
  }

  /** Records that `slot` now holds `key` in `space`, which it does not hold yet. */
  insert(space: number, key: string, slot: number): void {
    if ((this.count + 1) * 2 > this.buckets.length) this.growBuckets();
    // Usually the find of this key that missed hashed it already (not when its space was new).
    const hash = key === this.lastHashKey && space === this.lastHashSpace ? this.lastHash : hashOf(key, space, this.seed);
    this.keys[slot] = key;
    this.spaces[slot] = space;
    this.hashes[slot] = hash;
    this.place(slot, hash);
    this.count += 1;
  }

  /** The key held by `slot`, if any. */
  keyOf(slot: number): string | undefined {
    return this.keys[slot];
  }

  /** The state space of the key `slot` holds. */
  spaceOf(slot: number): number {
    return this.spaces[slot]!;
  }

  /** Forgets `slot`, moving later entries of its probe run back so no lookup ever stops short. */
  remove(slot: number): void {
    const { buckets, mask, slotMask } = this;
    let hole = this.hashes[slot]! & mask;
    while ((buckets[hole]! & slotMask) !== slot + 1) hole = (hole + 1) & mask;
    for (let next = (hole + 1) & mask; buckets[next] !== EMPTY; next = (next + 1) & mask) {
      const home = this.hashes[(buckets[next]! & slotMask) - 1]! & mask;
      // The entry at `next` may move into the hole if its home is not in (hole, next] (cyclically).
      const homeIsBetween = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (!homeIsBetween) {
        buckets[hole] = buckets[next]!;
        hole = next;
      }
    }
    buckets[hole] = EMPTY;
    this.keys[slot] = undefined;
    this.count -= 1;
  }

  /** Makes room for slots numbered below `slots`. */
  growSlots(slots: number): void {
    const spaces = new Int32Array(slots);
    spaces.set(this.spaces);
    this.spaces = spaces;
    const hashes = new Int32Array(slots);
    hashes.set(this.hashes);
    this.hashes = hashes;
  }

  private place(slot: number, hash: number): void {
    const { buckets, mask } = this;
    let bucket = hash & mask;
    while (buckets[bucket] !== EMPTY) bucket = (bucket + 1) & mask;
    buckets[bucket] = (hash & ~this.slotMask) | (slot + 1);
  }

  /** Doubles the buckets. In bucket order: the new buckets are then written nearly in sequence. */
  private growBuckets(): void {
    const old = this.buckets;
    this.buckets = new Int32Array(old.length * 2);
    this.mask = this.buckets.length - 1;
    const { slotMask, hashes } = this;
    // An index loop, not for-of: this runs a handful of times, mostly before the optimising compiler
    // has seen it, and an unoptimised for-of over a typed array took twice as long (bench/memory-store.js).
    for (let bucket = 0; bucket < old.length; bucket++) {
      const entry = old[bucket]!;
      if (entry !== EMPTY) this.place((entry & slotMask) - 1, hashes[(entry & slotMask) - 1]!);
    }
  }
}
