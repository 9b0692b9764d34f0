/**
 * Client-side pacing: a local token bucket per origin, learned from the rate-limit headers, so a
 * client waits before sending instead of meeting a 429. It holds every request to an origin that
 * said "nothing left until t" (remaining 0 with a reset, or a `Retry-After`) until then. Memory is
 * bounded: at most `maxHosts` origins are remembered, the least recently used forgotten first.
 */
import type { RateLimitInfo } from './headers.js';

/** What the pacer knows of one origin. Times are the client clock's epoch ms. */
interface HostState {
  /** The quota per window, once a header told it. */
  capacity: number | undefined;
  /** Tokens per ms (limit / window), once a policy header told the window. */
  ratePerMs: number | undefined;
  /** Tokens at `updatedAt`; below 0 when requests are already booked ahead (each waits its turn). */
  tokens: number;
  updatedAt: number;
  /** No request goes out before this instant. */
  holdUntil: number;
  /** When the quota is whole again, from the last reset the server gave (no-window servers). */
  refillAt: number;
}

/** The per-origin token buckets of one client, bounded to `maxHosts` origins. */
export class Pacer {
  /** A Map iterates in insertion order: re-inserting on use keeps the least recently used first. */
  private readonly hosts = new Map<string, HostState>();

  constructor(
    private readonly maxHosts: number,
    /** The window to assume when the headers give a limit but no window (the pacing option `windowMs`). */
    private readonly defaultWindowMs: number | undefined,
  ) {}

  /** Origins remembered now (at most `maxHosts`). */
  get size(): number {
    return this.hosts.size;
  }

  /**
   * Books one request to `origin` at `now` and returns how long it must wait first (0: go now).
   * The token is taken at once, so concurrent callers queue behind each other.
   */
  reserve(origin: string, now: number): number {
    const host = this.hosts.get(origin);
    if (host === undefined) return 0;
    this.touch(origin, host);
    const start = Math.max(now, host.holdUntil);
    this.refill(host, start);
    if (host.capacity === undefined) return start - now;
    if (host.tokens >= 1 || (host.ratePerMs === undefined && host.refillAt <= start)) {
      host.tokens -= 1;
      return start - now;
    }
    if (host.ratePerMs === undefined) {
      // No window known: the quota comes back whole at the server's reset, not bit by bit.
      const wait = Math.max(start, host.refillAt) - now;
      host.tokens -= 1;
      return wait;
    }
    const wait = start + (1 - host.tokens) / host.ratePerMs - now;
    host.tokens -= 1;
    return Math.ceil(wait);
  }

  /** Gives back a token booked by {@link reserve} for a request that was never sent (aborted). */
  release(origin: string): void {
    const host = this.hosts.get(origin);
    if (host !== undefined) host.tokens += 1;
  }

  /** Learns from a response of `origin` read at `now`. */
  learn(origin: string, info: RateLimitInfo, now: number): void {
    const known = info.limit !== undefined || info.remaining !== undefined || info.retryAfterMs !== undefined;
    let host = this.hosts.get(origin);
    if (host === undefined) {
      if (!known) return;
      host = { capacity: undefined, ratePerMs: undefined, tokens: Infinity, updatedAt: now, holdUntil: 0, refillAt: 0 };
    }
    this.touch(origin, host);
    this.refill(host, now);
    if (info.limit !== undefined && info.limit > 0) {
      host.capacity = info.limit;
      const windowMs = info.windowMs ?? this.defaultWindowMs;
      host.ratePerMs = windowMs === undefined ? undefined : info.limit / windowMs;
      host.tokens = Math.min(host.tokens, host.capacity);
    }
    // The server's count wins when it is lower: the pacer never believes in more than it was told.
    if (info.remaining !== undefined) host.tokens = Math.min(host.tokens, info.remaining);
    if (info.resetMs !== undefined) host.refillAt = now + info.resetMs;
    if (info.remaining === 0 && info.resetMs !== undefined) host.holdUntil = Math.max(host.holdUntil, now + info.resetMs);
    if (info.retryAfterMs !== undefined) host.holdUntil = Math.max(host.holdUntil, now + info.retryAfterMs);
  }

  /** Brings `host`'s tokens up to `at`: a steady refill with a known rate, else whole at the reset. */
  private refill(host: HostState, at: number): void {
    if (at <= host.updatedAt) return;
    if (host.capacity !== undefined && host.ratePerMs !== undefined) {
      host.tokens = Math.min(host.capacity, host.tokens + (at - host.updatedAt) * host.ratePerMs);
    } else if (host.capacity !== undefined && host.refillAt > host.updatedAt && host.refillAt <= at) {
      host.tokens = host.capacity + Math.min(0, host.tokens);
    }
    host.updatedAt = at;
  }

  private touch(origin: string, host: HostState): void {
    this.hosts.delete(origin);
    this.hosts.set(origin, host);
    if (this.hosts.size > this.maxHosts) this.hosts.delete(this.hosts.keys().next().value!);
  }
}
