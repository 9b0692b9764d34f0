/**
 * A circuit breaker around the store. Closed: every call goes to the store, and failures are
 * watched two ways — a run of consecutive failures (a store that went away) and the error rate over
 * a sliding window (a store that fails one call in two). Open: no call goes to the store; the
 * limiter answers by the failure modes. After `openMs` a few probe calls are let through
 * (half-open); when they all succeed the breaker closes, when one fails it opens again.
 *
 * Time comes from a clock the caller gives, so tests drive it without sleeping.
 */
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkOptions, checkWholeNumbers, type WholeNumberRange } from '../options.js';

export type BreakerState = 'closed' | 'open' | 'half-open';

/** Settings of the breaker; every field has a default. */
export interface BreakerOptions {
  /** Consecutive failed calls that open the breaker. Default 5. */
  readonly failureThreshold?: number;
  /** Share of failed calls (0 < rate ≤ 1) over `windowMs` that opens the breaker. Default 0.5. */
  readonly errorRate?: number;
  /** The error-rate window in ms. Default 10,000. */
  readonly windowMs?: number;
  /** Calls the window must hold before the error rate counts. Default 20. */
  readonly minimumCalls?: number;
  /** How long the breaker stays open before probing, in ms. Default 200. */
  readonly openMs?: number;
  /** Probe calls let through when half-open; all must succeed to close. Default 3. */
  readonly halfOpenProbes?: number;
}

/** A change of state, with what caused it. */
export interface BreakerTransition {
  readonly from: BreakerState;
  readonly to: BreakerState;
  /** Epoch ms. */
  readonly at: number;
  /** Why: the failure that opened it, or `probes succeeded`, `open period over`. */
  readonly cause: string;
}

const BUCKETS = 10;

interface Settings {
  readonly failureThreshold: number;
  readonly errorRate: number;
  readonly windowMs: number;
  readonly minimumCalls: number;
  readonly openMs: number;
  readonly halfOpenProbes: number;
}

export class CircuitBreaker {
  private current: BreakerState = 'closed';
  private readonly settings: Settings;
  private consecutive = 0;
  private openedAt = 0;
  private probesInFlight = 0;
  private probesSucceeded = 0;
  /** Calls and failures per window bucket, bucket i covering [start_i, start_i + windowMs / BUCKETS). */
  private readonly calls = new Array<number>(BUCKETS).fill(0);
  private readonly failures = new Array<number>(BUCKETS).fill(0);
  private bucketStart = 0;
  private bucketIndex = 0;

  constructor(
    options: BreakerOptions,
    private readonly clock: () => number,
    private readonly onTransition: (transition: BreakerTransition) => void,
  ) {
    this.settings = breakerSettings(options);
  }

  get state(): BreakerState {
    return this.current;
  }

  /**
   * Whether a call may go to the store now. Open: no, until `openMs` has passed, then the breaker
   * half-opens. Half-open: only while fewer than `halfOpenProbes` probes are out. Every `true`
   * must be followed by exactly one `success()`, `failure()` or `release()`.
   */
  allow(): boolean {
    if (this.current === 'closed') return true;
    if (this.current === 'open') {
      if (this.clock() - this.openedAt < this.settings.openMs) return false;
      this.move('half-open', 'open period over: probing the store');
    }
    if (this.probesInFlight + this.probesSucceeded >= this.settings.halfOpenProbes) return false;
    this.probesInFlight += 1;
    return true;
  }

  success(): void {
    if (this.current === 'half-open') {
      this.probesInFlight = Math.max(0, this.probesInFlight - 1);
      this.probesSucceeded += 1;
      if (this.probesSucceeded >= this.settings.halfOpenProbes) this.move('closed', `${this.probesSucceeded} probes succeeded`);
      return;
    }
    this.consecutive = 0;
    this.count(false);
  }

  /**
   * The call `allow()` let through did not go to the store after all (the guard shed it: too many
   * calls in flight). It says nothing of the store's health: a probe's permit is given back, and
   * nothing is counted.
   */
  release(): void {
    if (this.current === 'half-open') this.probesInFlight = Math.max(0, this.probesInFlight - 1);
  }

  failure(cause: string): void {
    if (this.current === 'half-open') {
      this.open(`a probe failed: ${cause}`);
      return;
    }
    if (this.current === 'open') return;
    this.consecutive += 1;
    const { calls, failures } = this.count(true);
    const { failureThreshold, minimumCalls, errorRate } = this.settings;
    if (this.consecutive >= failureThreshold) {
      this.open(`${this.consecutive} consecutive failures, the last: ${cause}`);
    } else if (calls >= minimumCalls && failures / calls >= errorRate) {
      this.open(`${failures} of the last ${calls} calls failed, the last: ${cause}`);
    }
  }

  private open(cause: string): void {
    this.openedAt = this.clock();
    this.move('open', cause);
  }

  private move(to: BreakerState, cause: string): void {
    const from = this.current;
    this.current = to;
    this.consecutive = 0;
    this.probesInFlight = 0;
    this.probesSucceeded = 0;
    if (to === 'closed') this.clearWindow();
    this.onTransition({ from, to, at: this.clock(), cause });
  }

  /** Records a call in the window and returns the window's totals. */
  private count(failed: boolean): { calls: number; failures: number } {
    const now = this.clock();
    const width = this.settings.windowMs / BUCKETS;
    if (now - this.bucketStart >= width) {
      const steps = Math.min(BUCKETS, Math.floor((now - this.bucketStart) / width));
      for (let i = 1; i <= steps; i++) {
        const index = (this.bucketIndex + i) % BUCKETS;
        this.calls[index] = 0;
        this.failures[index] = 0;
      }
      this.bucketIndex = (this.bucketIndex + steps) % BUCKETS;
      this.bucketStart = steps === BUCKETS ? now : this.bucketStart + steps * width;
    }
    this.calls[this.bucketIndex]! += 1;
    if (failed) this.failures[this.bucketIndex]! += 1;
    let calls = 0;
    let failures = 0;
    for (let i = 0; i < BUCKETS; i++) {
      calls += this.calls[i]!;
      failures += this.failures[i]!;
    }
    return { calls, failures };
  }

  private clearWindow(): void {
    this.calls.fill(0);
    this.failures.fill(0);
  }
}

/** The breaker's whole-number settings: their ranges and defaults. */
const BREAKER_NUMBERS = {
  failureThreshold: { min: 1, max: 1_000_000, fallback: 5 },
  // The window is cut into BUCKETS buckets of at least 1 ms.
  windowMs: { min: BUCKETS, max: 3_600_000, fallback: 10_000 },
  minimumCalls: { min: 1, max: 1_000_000, fallback: 20 },
  openMs: { min: 1, max: 3_600_000, fallback: 200 },
  halfOpenProbes: { min: 1, max: 1_000, fallback: 3 },
} as const satisfies Record<string, WholeNumberRange>;

const BREAKER_OPTIONS = ['failureThreshold', 'errorRate', 'windowMs', 'minimumCalls', 'openMs', 'halfOpenProbes'];

/** Validated settings with defaults. */
export function breakerSettings(options: BreakerOptions): Settings {
  checkOptions('breaker', options, BREAKER_OPTIONS, '{ failureThreshold: 5, openMs: 200 } or false', 'breaker option');
  const errorRate = options.errorRate ?? 0.5;
  if (typeof errorRate !== 'number' || !(errorRate > 0 && errorRate <= 1)) {
    throw new InvalidOptionError(`breaker.errorRate must be a share above 0 and at most 1 (0.5 = half the calls), got ${describeValue(errorRate)}`);
  }
  return { ...checkWholeNumbers(BREAKER_NUMBERS, (name) => options[name], (name) => `breaker.${name}`), errorRate };
}
