/**
 * Keys an operator blocked by hand (`POST /v1/keys/block`): denied at once, without touching the
 * store, until the block expires. A key is either a `/v1/limit` key (`user:42`) or a descriptor
 * entry `key=value` (`remote_address=203.0.113.7`), which blocks every check carrying that entry.
 * Bounded (at most MAX_BLOCKS), and local to this node.
 */
import { InvalidOptionError, describeValue } from '../errors.js';

const MAX_BLOCKS = 10_000;
const MAX_BLOCK_MS = 7 * 24 * 3_600_000;
const MAX_BLOCK_KEY = 1024;

export class BlockList {
  private readonly until = new Map<string, number>();

  /** Blocks `key` for `ttlMs`; refuses a bad duration or a full list. */
  block(key: string, ttlMs: number, now = Date.now()): number {
    if (typeof key !== 'string' || key === '' || key.length > MAX_BLOCK_KEY) {
      const got = typeof key === 'string' && key !== '' ? `${key.length} characters` : describeValue(key);
      throw new InvalidOptionError(`key must be a non-empty string of at most ${MAX_BLOCK_KEY} characters, got ${got}`);
    }
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_BLOCK_MS) {
      throw new InvalidOptionError(`ttlMs must be a whole number of ms from 1 to ${MAX_BLOCK_MS} (one week), got ${String(ttlMs)}`);
    }
    this.prune(now);
    if (!this.until.has(key) && this.until.size >= MAX_BLOCKS) {
      throw new InvalidOptionError(`${this.until.size} keys are blocked already, at most ${MAX_BLOCKS} at once; unblock some or wait for blocks to expire`);
    }
    const expires = now + ttlMs;
    this.until.set(key, expires);
    return expires;
  }

  unblock(key: string): boolean {
    return this.until.delete(key);
  }

  /** ms left on `key`'s block, or 0. */
  remaining(key: string, now = Date.now()): number {
    if (this.until.size === 0) return 0;
    const expires = this.until.get(key);
    if (expires === undefined) return 0;
    if (expires <= now) {
      this.until.delete(key);
      return 0;
    }
    return expires - now;
  }

  /** Blocked keys and when each block ends (epoch ms). */
  list(now = Date.now()): { key: string; until: number }[] {
    this.prune(now);
    return [...this.until].map(([key, until]) => ({ key, until }));
  }

  get size(): number {
    return this.until.size;
  }

  private prune(now: number): void {
    for (const [key, expires] of this.until) if (expires <= now) this.until.delete(key);
  }
}
