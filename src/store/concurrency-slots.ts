/**
 * Concurrency slots in process memory (the memory store's, and the `local` failure mode's): per
 * key a map of holder id → expiry. Each call first drops the key's expired holders, and sweeps a
 * few other keys (the oldest visited first, then moved to the back), so a key whose holders all
 * died is collected after a bounded number of calls: memory follows the slots held, not the keys
 * ever seen.
 */
import type { SlotAnswer, SlotRelease, SlotRequest } from './slots.js';

/** Other keys examined for expiry on each call. */
const SWEEP_STEPS = 2;

export class SlotTable {
  /** key → (id → expiry, epoch ms); insertion order is the sweep's order. */
  private readonly keys = new Map<string, Map<string, number>>();

  acquire(key: string, request: SlotRequest, now: number): SlotAnswer {
    const holders = this.live(key, now);
    const mine = holders?.has(request.id) === true;
    const held = holders?.size ?? 0;
    if (!mine && held >= request.limit) {
      let earliest = Infinity;
      for (const expiry of holders!.values()) earliest = Math.min(earliest, expiry);
      this.sweep(now);
      return { allowed: false, held, retryAfter: earliest - now, expiresAt: 0, now };
    }
    const expiresAt = now + request.ttlMs;
    // A repeated acquire with the same id renews its slot: it counts once.
    if (holders === undefined) this.keys.set(key, new Map([[request.id, expiresAt]]));
    else holders.set(request.id, expiresAt);
    this.sweep(now);
    return { allowed: true, held: mine ? held : held + 1, retryAfter: 0, expiresAt, now };
  }

  release(key: string, id: string, now: number): SlotRelease {
    const holders = this.live(key, now);
    const released = holders?.delete(id) === true;
    if (holders !== undefined && holders.size === 0) this.keys.delete(key);
    this.sweep(now);
    return { released, held: holders?.size ?? 0 };
  }

  /** Slots of `key` held at `now` (its expired holders dropped). */
  held(key: string, now: number): number {
    return this.live(key, now)?.size ?? 0;
  }

  /** Forgets the slots of every key starting with `prefix` (a prefix reset); returns how many keys. */
  forgetPrefix(prefix: string): number {
    let forgotten = 0;
    for (const key of this.keys.keys()) {
      if (!key.startsWith(prefix)) continue;
      this.keys.delete(key);
      forgotten += 1;
    }
    return forgotten;
  }

  /** Keys holding at least one slot not yet collected (expired ones are collected as calls go by). */
  get size(): number {
    return this.keys.size;
  }

  /** The key's holders after dropping the expired ones; undefined when none is left. */
  private live(key: string, now: number): Map<string, number> | undefined {
    const holders = this.keys.get(key);
    if (holders === undefined) return undefined;
    for (const [id, expiry] of holders) if (expiry <= now) holders.delete(id);
    if (holders.size > 0) return holders;
    this.keys.delete(key);
    return undefined;
  }

  /** Examines the keys longest unvisited: drops what expired, moves a key still held to the back. */
  private sweep(now: number): void {
    let steps = Math.min(SWEEP_STEPS, this.keys.size);
    for (const key of this.keys.keys()) {
      if (steps-- <= 0) break;
      const holders = this.live(key, now);
      if (holders === undefined) continue;
      this.keys.delete(key);
      this.keys.set(key, holders);
    }
  }
}
