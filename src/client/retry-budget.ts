/**
 * When to retry, and how long to wait first: the retry budget shared by every call of one client
 * (as gRPC's retry throttling and Finagle's RetryBudget do), and exponential backoff with full
 * jitter.
 */

/**
 * A token bucket of retries. It starts full at `maxTokens`; each call's first attempt adds `ratio`
 * of a token (never past `maxTokens`); each retry spends a whole one and is refused when less than
 * one is left. So over any run of N calls a client retries at most `maxTokens + ratio × N` times:
 * when a server is down or throttling everyone, retries add at most `ratio` to the traffic instead
 * of multiplying it by the attempt count.
 */
export class RetryBudget {
  /** Thousandths of a token: adding 0.1 ten times makes exactly one, with no float drift. */
  private milliTokens: number;
  private readonly milliRatio: number;
  private readonly milliMax: number;

  constructor(ratio: number, maxTokens: number) {
    this.milliRatio = Math.round(ratio * 1000);
    this.milliMax = maxTokens * 1000;
    this.milliTokens = this.milliMax;
  }

  /** A call starts: its first attempt earns the budget `ratio` of a retry. */
  deposit(): void {
    this.milliTokens = Math.min(this.milliMax, this.milliTokens + this.milliRatio);
  }

  /** Takes one retry from the budget; false (and nothing taken) when less than one is left. */
  withdraw(): boolean {
    if (this.milliTokens < 1000) return false;
    this.milliTokens -= 1000;
    return true;
  }

  /** Retries the budget would allow now (whole and partial). */
  get tokens(): number {
    return this.milliTokens / 1000;
  }
}

/**
 * Full jitter (the AWS Architecture Blog's name): a wait drawn uniformly from
 * [0, min(capMs, baseMs × 2^retry)), whole ms; `retry` counts from 0 for the first retry.
 * Spreading retries over the whole interval is what keeps many throttled clients from coming back
 * together.
 */
export function fullJitterDelay(retry: number, baseMs: number, capMs: number, random: () => number): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(retry, 52));
  const draw = random();
  // A random source outside [0, 1) is clamped rather than trusted: a wait is never negative or past the cap.
  const share = Number.isFinite(draw) ? Math.min(Math.max(draw, 0), 1) : 0;
  return Math.floor(share * ceiling);
}
