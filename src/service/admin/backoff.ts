/**
 * Slowing down token guessing on the admin listener (docs/operations.md, "Audit log"): an address
 * may send {@link FREE_FAILURES} wrong tokens (admin or metrics); each wrong token after those
 * locks it out for a time that doubles, from {@link FIRST_LOCKOUT_MS} up to {@link MAX_LOCKOUT_MS}.
 * While locked out, every request of that address needing a token is answered 429 with
 * Retry-After, its token not even compared, so guesses from one address come at most once per
 * lockout, however many connections carry them. A right token forgets the address's failures;
 * so do {@link FORGET_AFTER_MS} without a failure.
 */

/** Wrong tokens an address may send before it is slowed down: a few typos. */
export const FREE_FAILURES = 5;
/** The first lockout; each further wrong token doubles it. */
export const FIRST_LOCKOUT_MS = 1_000;
/** The longest lockout. */
export const MAX_LOCKOUT_MS = 300_000;
/** An address without a wrong token this long starts afresh. */
const FORGET_AFTER_MS = 900_000;
/** Addresses followed at once; past it the oldest is forgotten (a bound, not a defence against many addresses). */
const MAX_ADDRESSES = 10_000;

interface Failures {
  count: number;
  lastAt: number;
  lockedUntil: number;
}

/** A new lockout: which address, after how many wrong tokens, for how long. */
export interface Lockout {
  readonly failures: number;
  readonly lockoutMs: number;
}

export class AuthBackoff {
  private readonly addresses = new Map<string, Failures>();

  constructor(private readonly clock: () => number) {}

  /** Milliseconds `address` is still locked out for, or 0. */
  lockedFor(address: string): number {
    const entry = this.addresses.get(address);
    return entry === undefined ? 0 : Math.max(0, entry.lockedUntil - this.clock());
  }

  /** Counts a wrong token from `address`; the lockout it starts, if any. */
  failed(address: string): Lockout | undefined {
    const now = this.clock();
    let entry = this.addresses.get(address);
    if (entry === undefined || now - entry.lastAt > FORGET_AFTER_MS) entry = { count: 0, lastAt: now, lockedUntil: 0 };
    // Re-inserted: the map's order is the order of last failure, oldest first.
    this.addresses.delete(address);
    this.addresses.set(address, entry);
    if (this.addresses.size > MAX_ADDRESSES) this.addresses.delete(this.addresses.keys().next().value!);
    entry.count += 1;
    entry.lastAt = now;
    if (entry.count <= FREE_FAILURES) return undefined;
    const lockoutMs = Math.min(MAX_LOCKOUT_MS, FIRST_LOCKOUT_MS * 2 ** Math.min(30, entry.count - FREE_FAILURES - 1));
    entry.lockedUntil = now + lockoutMs;
    return { failures: entry.count, lockoutMs };
  }

  /** A right token from `address`: its failures are forgotten. */
  succeeded(address: string): void {
    this.addresses.delete(address);
  }
}
