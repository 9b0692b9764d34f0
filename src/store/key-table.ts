/**
 * An open-addressing hash table from (state space, key) to a slot number, for the memory store.
 *
 * Why not a `Map`: on a million distinct keys a `Map` costs a lookup plus an insert per new key and
 * ~50 bytes per entry; this table takes one probe sequence and 9 to 18 bytes per key (an 8-byte
 * bucket and its byte of tag, at most half full), and grows without rehashing any string. Linear probing with
 * backward-shift deletion: no tombstones, so probe sequences stay short however keys come and go.
 *
 * A bucket is two 32-bit words side by side: the key's whole hash, and its slot + 1. Beside the
 * buckets, one byte per bucket says whether it is empty or else holds 7 more bits of its key's hash
 * (its tag); a probe reads the tags alone, and the bucket only on a tag that matches. The tags are an
 * eighth of the buckets' size (2 MB for a million keys, against 16 MB of buckets), so a new key's
 * lookup mostly stays in the cache: measured, the load of a new key's bucket was half the time to
 * store a million new keys, a cache miss each (BENCHMARKS.md, "1M new keys: a probe on tags, state in chunks"). The
 * insert that follows writes its bucket, a store the processor need not wait for. Doubling the
 * buckets reads the old ones in order and finds each entry's hash beside it: one pass over the
 * arrays, no per-entry read elsewhere (growth reading each entry's hash from a per-slot array in
 * random order was a cache miss per key held, 9% of the time to store a million new keys).
 *
 * The hash is seeded per table with a random value, so colliding keys cannot be precomputed.
 */
import { randomInt } from 'node:crypto';

const EMPTY = 0;
const MIN_BUCKETS = 1024;
/** A held bucket's tag has this bit set; its other 7 bits are the top of its key's hash. */
const HELD_TAG = 0x80;
/** Words per bucket: the hash, then slot + 1. */
const WIDTH = 2;

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

/** A held bucket's tag for `hash`: never {@link EMPTY}. The bucket index takes the low bits, the tag the top 7. */
function tagOf(hash: number): number {
  return (hash >>> 25) | HELD_TAG;
}

export class KeyTable {
  /** Per bucket b: words[2b] the key's hash, words[2b + 1] its slot + 1 (0: empty). */
  private buckets = new Int32Array(MIN_BUCKETS * WIDTH);
  /** Per bucket: {@link EMPTY}, or the {@link tagOf} its key's hash. What a probe reads first. */
  private tags = new Uint8Array(MIN_BUCKETS);
  /** Buckets − 1 (their number is a power of two). */
  private mask = MIN_BUCKETS - 1;
  private count = 0;
  private readonly seed = randomInt(0, 2 ** 31);
  /** Per slot: its key. */
  private readonly keys: (string | undefined)[] = [];
  /** State space of each slot (store/state-spaces.ts: at most one per key held). */
  private spaces: Int32Array;
  /** The hash computed by the last {@link find}, and its key and space: the {@link insert} that follows a miss reuses it. */
  private lastHash = 0;
  private lastHashKey: string | undefined;
  private lastHashSpace = -1;
  /** The last key found and its slot: a hot key skips hashing (checked against the slot, so never stale). */
  private lastKey: string | undefined;
  private lastSpace = -1;
  private lastSlot = -1;

  /** `slots` to start with. */
  constructor(slots: number) {
    this.spaces = new Int32Array(slots);
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
    const { buckets, tags, mask } = this;
    const tag = tagOf(hash);
    for (let bucket = hash & mask; ; bucket = (bucket + 1) & mask) {
      const seen = tags[bucket]!;
      if (seen === EMPTY) return -1;
      // The tag, then the whole hash: another key's bucket is then rarely read, and its slot more rarely still.
      if (seen === tag && buckets[bucket * WIDTH] === hash) {
        const slot = buckets[bucket * WIDTH + 1]! - 1;
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
    if ((this.count + 1) * 2 > this.mask + 1) this.growBuckets();
    // Usually the find of this key that missed hashed it already (not when its space was new).
    const hash = key === this.lastHashKey && space === this.lastHashSpace ? this.lastHash : hashOf(key, space, this.seed);
    this.keys[slot] = key;
    this.spaces[slot] = space;
    place(this.buckets, this.tags, this.mask, hash, slot + 1);
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
    const { buckets, tags, mask } = this;
    // Hashed again (removals are evictions, expiry and resets, not the decision path): no per-slot copy of the hash kept.
    let hole = hashOf(this.keys[slot]!, this.spaces[slot]!, this.seed) & mask;
    while (buckets[hole * WIDTH + 1] !== slot + 1) hole = (hole + 1) & mask;
    for (let next = (hole + 1) & mask; tags[next] !== EMPTY; next = (next + 1) & mask) {
      const home = buckets[next * WIDTH]! & mask;
      // The entry at `next` may move into the hole if its home is not in (hole, next] (cyclically).
      const homeIsBetween = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (!homeIsBetween) {
        buckets[hole * WIDTH] = buckets[next * WIDTH]!;
        buckets[hole * WIDTH + 1] = buckets[next * WIDTH + 1]!;
        tags[hole] = tags[next]!;
        hole = next;
      }
    }
    buckets[hole * WIDTH] = 0;
    buckets[hole * WIDTH + 1] = EMPTY;
    tags[hole] = EMPTY;
    this.keys[slot] = undefined;
    this.count -= 1;
  }

  /** Makes room for slots numbered below `slots`. */
  growSlots(slots: number): void {
    const spaces = new Int32Array(slots);
    spaces.set(this.spaces);
    this.spaces = spaces;
  }

  /** Doubles the buckets, reading the old ones in order: the new ones are then written nearly in sequence too. */
  private growBuckets(): void {
    const old = this.buckets;
    const buckets = new Int32Array(old.length * 2);
    const tags = new Uint8Array(buckets.length / WIDTH);
    const mask = tags.length - 1;
    // An index loop, not for-of: this runs a handful of times, mostly before the optimising compiler
    // has seen it, and an unoptimised for-of over a typed array took twice as long (bench/memory-store.js).
    for (let word = 0; word < old.length; word += WIDTH) {
      const held = old[word + 1]!;
      if (held !== EMPTY) place(buckets, tags, mask, old[word]!, held);
    }
    this.buckets = buckets;
    this.tags = tags;
    this.mask = mask;
  }
}

/** Puts (hash, held) in the first empty bucket of hash's probe run. */
function place(buckets: Int32Array, tags: Uint8Array, mask: number, hash: number, held: number): void {
  let bucket = hash & mask;
  while (tags[bucket] !== EMPTY) bucket = (bucket + 1) & mask;
  tags[bucket] = tagOf(hash);
  buckets[bucket * WIDTH] = hash;
  buckets[bucket * WIDTH + 1] = held;
}
