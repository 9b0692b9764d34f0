/**
 * An aligned fixed window on memcached by `incr` and `add`, atomic without compare-and-set: one
 * item per key holds the window's number and its count packed in one integer below 2^53,
 * `(window index mod 2^21) × 2^32 + count`. `incr` adds the cost and answers both; a count past
 * the capacity is taken back with `decr` (unless rejected hits count). Only the first call of a
 * new window replaces the finished one, by compare-and-set. The window number kept beside the
 * count is what lets a node whose clock went back keep counting in the later window, as the
 * algorithm says (algorithms/fixed-window.ts), and lets `reset` delete one item.
 */
import { fixedWindow } from '../../algorithms/fixed-window.js';
import { floorDiv } from '../../algorithms/integer.js';
import type { Decision } from '../../decision.js';
import type { CompiledPolicy } from '../../policy.js';
import { MemcachedReplyError, type MemcachedConnection } from './connection.js';
import { exptime, foreignValue } from './keys.js';

const COUNT_SPAN = 2 ** 32;
const INDEX_SPAN = 2 ** 21;
/** Past this, rejected hits stop being counted (the packed count must never reach the window bits). */
const COUNT_CEILING = 2 ** 31;

/** Whether `policy` is decided by {@link WindowCounter}: an aligned, non-calendar fixed window whose counts fit the packing. */
export function countsByIncrement(policy: CompiledPolicy): boolean {
  return packsWindow(policy) && policy.blockMs === 0;
}

/**
 * Whether `policy`'s state may be held as a packed window count: an aligned, non-calendar fixed
 * window whose counts fit. One with a penalty is decided by compare-and-set instead (its block
 * rides in the same item, state-item.ts), which reads a packed count it finds.
 */
export function packsWindow(policy: CompiledPolicy): boolean {
  return policy.algorithm === 'fixed-window' && !policy.firstHit && policy.calendar === undefined && policy.capacity < COUNT_CEILING;
}

/** A packed count as stored: digits only. */
const PACKED = /^\d+$/;
const NOT_PACKED = Symbol('not packed');

/** `incr`'s answer, or NOT_PACKED when the item holds text that is no number (the compare-and-set form). */
async function incrementOrNot(connection: MemcachedConnection, key: string, cost: number): Promise<number | undefined | typeof NOT_PACKED> {
  try {
    return await connection.incr(key, cost);
  } catch (error) {
    if (error instanceof MemcachedReplyError && /non-numeric/.test(error.message)) return NOT_PACKED;
    throw error;
  }
}

/** The window index and count packed in `value`, the index the one nearest `index` with those low bits. */
export function unpack(key: string, value: number, index: number): { index: number; count: number } {
  if (!Number.isSafeInteger(value) || value < 0) throw foreignValue(key, String(value));
  const tag = Math.floor(value / COUNT_SPAN);
  let offset = (((tag - (index % INDEX_SPAN)) % INDEX_SPAN) + INDEX_SPAN) % INDEX_SPAN;
  if (offset >= INDEX_SPAN / 2) offset -= INDEX_SPAN;
  return { index: index + offset, count: value % COUNT_SPAN };
}

function pack(index: number, count: number): string {
  return String((index % INDEX_SPAN) * COUNT_SPAN + count);
}

/** The algorithm's answer for the window `index` holding `prior` before this call, recorded as `commit` says. */
function decideOn(index: number, prior: number, at: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  const state = new Float64Array([prior, index * policy.windowMs]);
  return fixedWindow.decide(state, 0, at, cost, policy, commit);
}

export class WindowCounter {
  constructor(private readonly attempts: number, private readonly exhausted: (key: string) => Error) {}

  /** A look at the window; undefined when the item holds state in the compare-and-set form (state-item.ts) instead. */
  async peek(connection: MemcachedConnection, key: string, policy: CompiledPolicy, cost: number, at: number): Promise<Decision | undefined> {
    const index = floorDiv(at, policy.windowMs);
    const text = await connection.get(key);
    if (text === undefined) return decideOn(index, 0, at, cost, policy, false);
    if (!PACKED.test(text)) return undefined;
    const stored = unpack(key, Number(text), index);
    // A finished window counts nothing now; a later one (a clock that went back) is still counted in.
    return stored.index < index ? decideOn(index, 0, at, cost, policy, false) : decideOn(stored.index, stored.count, at, cost, policy, false);
  }

  /**
   * A consume by `incr`; undefined when the item holds state in the compare-and-set form
   * (state-item.ts: a reservation's records ride beside the count), which `incr` leaves untouched.
   */
  async consume(connection: MemcachedConnection, key: string, policy: CompiledPolicy, cost: number, at: number, explicitNow: boolean): Promise<Decision | undefined> {
    if (cost > policy.capacity) return this.peek(connection, key, policy, cost, at);
    const index = floorDiv(at, policy.windowMs);
    const ttl = exptime((index + 1) * policy.windowMs, at, explicitNow);
    for (let attempt = 0; attempt < this.attempts; attempt++) {
      const value = await incrementOrNot(connection, key, cost);
      if (value === NOT_PACKED) return undefined;
      if (value === undefined) {
        if ((await connection.add(key, pack(index, cost), ttl)) === 'STORED') return decideOn(index, 0, at, cost, policy, true);
        continue;
      }
      const stored = unpack(key, value, index);
      if (stored.index >= index) return this.counted(connection, key, policy, cost, at, stored);
      // Our increment went to a finished window: open this one in its place, unless another call just did.
      const held = await connection.gets(key);
      if (held !== undefined && !PACKED.test(held.value)) return undefined;
      if (held === undefined || unpack(key, Number(held.value), index).index >= index) continue;
      if ((await connection.cas(key, pack(index, cost), ttl, held.cas)) === 'STORED') return decideOn(index, 0, at, cost, policy, true);
    }
    throw this.exhausted(key);
  }

  /** The answer for an increment counted in window `stored.index`; a denial not to be counted is taken back. */
  private async counted(connection: MemcachedConnection, key: string, policy: CompiledPolicy, cost: number, at: number, stored: { index: number; count: number }): Promise<Decision> {
    const decision = decideOn(stored.index, stored.count - cost, at, cost, policy, true);
    if (!decision.allowed && !(policy.countRejected && stored.count < COUNT_CEILING)) await connection.decr(key, cost);
    return decision;
  }
}
