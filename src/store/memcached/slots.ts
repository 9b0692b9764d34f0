/**
 * Concurrency slots on memcached (src/store/slots.ts): one item per caller's key holds its
 * holders, `<permit id>=<expires at>,…` (ids are letters, digits and `_ . : -`, limiter/concurrency.ts).
 * An acquire or a release is one compare-and-set step on that item; expired holders are dropped on
 * every touch, so a holder that died frees its slot after its ttl without anyone's help. The item
 * lives as long as its last slot. At most {@link MAX_MEMCACHED_SLOTS} slots per key (~143 bytes a
 * holder at most: the item stays within memcached's 1 MiB).
 */
import { InvalidOptionError } from '../../errors.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../slots.js';
import type { ItemCodec, ItemOp } from './cas-lanes.js';
import { foreignValue, realUntil } from './keys.js';

/** Most slots of one key on memcached (the limiter allows 100,000 on the memory store and Redis). */
export const MAX_MEMCACHED_SLOTS = 5_000;

const HOLDER = /^([A-Za-z0-9_.:-]{1,128})=(\d+)$/;

/** Holder id → when its slot expires (the calls' timeline), in the order they were granted. */
export type Holders = Map<string, number>;

export const slotsCodec: ItemCodec<Holders> = {
  decode(key, text) {
    const holders: Holders = new Map();
    if (text === undefined || text === '') return holders;
    for (const part of text.split(',')) {
      const match = HOLDER.exec(part);
      if (match === null) throw foreignValue(key, text);
      holders.set(match[1]!, Number(match[2]));
    }
    return holders;
  },
  encode: (holders) => Array.from(holders, ([id, expiry]) => `${id}=${expiry}`).join(','),
  keepUntil: () => 0,
};

/** The holders left at `at`, the expired dropped. */
function live(holders: Holders, at: number): Holders {
  for (const [id, expiry] of holders) if (expiry <= at) holders.delete(id);
  return holders;
}

/** How long the item must be kept: until its last slot's expiry. */
function untilLast(holders: Holders, at: number, explicitNow: boolean): number {
  let last = at;
  for (const expiry of holders.values()) last = Math.max(last, expiry);
  return realUntil(last, at, explicitNow);
}

export function checkSlotLimit(request: SlotRequest): void {
  if (request.limit > MAX_MEMCACHED_SLOTS) {
    throw new InvalidOptionError(`acquire: limit ${request.limit} is past the ${MAX_MEMCACHED_SLOTS} slots per key the memcached store keeps (one item holds a key's holders, within memcached's 1 MiB); lower the limit, or use the memory or Redis store`);
  }
}

/** An acquire as one compare-and-set step (an id already holding a slot renews it: it counts once). */
export function acquireOp(request: SlotRequest, now: number | undefined): ItemOp<Holders, SlotAnswer> {
  return (holders, clock) => {
    const at = now ?? clock;
    live(holders, at);
    const mine = holders.has(request.id);
    const held = holders.size;
    if (!mine && held >= request.limit) {
      let earliest = Infinity;
      for (const expiry of holders.values()) earliest = Math.min(earliest, expiry);
      return { value: { allowed: false, held, retryAfter: earliest - at, expiresAt: 0, now: at }, until: untilLast(holders, at, now !== undefined) };
    }
    const expiresAt = at + request.ttlMs;
    holders.delete(request.id);
    holders.set(request.id, expiresAt);
    return { value: { allowed: true, held: mine ? held : held + 1, retryAfter: 0, expiresAt, now: at }, until: untilLast(holders, at, now !== undefined) };
  };
}

export function releaseOp(id: string, now: number | undefined): ItemOp<Holders, SlotRelease> {
  return (holders, clock) => {
    const at = now ?? clock;
    live(holders, at);
    const released = holders.delete(id);
    return { value: { released, held: holders.size }, until: untilLast(holders, at, now !== undefined) };
  };
}

/** Slots held at `at` in the item held as `text` (a look). */
export function heldIn(key: string, text: string | undefined, at: number): number {
  return live(slotsCodec.decode(key, text, at), at).size;
}
