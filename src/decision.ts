/**
 * The answer to "may this request go on?". Denial is a value (`allowed: false`), never an error.
 */

/**
 * Why a decision did not come from a normal evaluation of the stored state. Closed union: a
 * degraded or special answer never looks like a normal one.
 */
export type DecisionReason =
  /** The policy's limit is 0: everything is denied, nothing is stored. */
  | 'limit-zero'
  /** The request costs more than the policy can ever admit at once; retrying cannot help. */
  | 'cost-exceeds-capacity'
  /** The store failed, timed out or its breaker is open, and the failure mode `open` admitted. */
  | 'fail-open'
  /** ... and the failure mode `closed` denied. */
  | 'fail-closed'
  /** ... and the failure mode `local` decided on this process's own limiter (⌈limit / nodes⌉, the nodes sharing the store). */
  | 'local-fallback'
  /** The key is serving a penalty (`blockDuration`): denied until `retryAfter`, whatever its quota. */
  | 'blocked';

/** The outcome of one rate limit check. Times are epoch milliseconds, durations milliseconds. */
export interface Decision {
  /** Whether the request may go on. */
  readonly allowed: boolean;
  /** The quota `remaining` counts down from: `limit` for window algorithms, `burst` for buckets and GCRA. */
  readonly limit: number;
  /** Units still available after this request (never negative). */
  readonly remaining: number;
  /** Epoch ms when the quota is whole again (never before the decision's `now`). */
  readonly resetAt: number;
  /** Whole ms until a request of the same cost could be admitted; 0 when allowed, > 0 when denied. */
  readonly retryAfter: number;
  /**
   * The instant the decision was made (epoch ms): the caller's `now`, else the store's clock (Redis
   * `TIME` on Redis). Every relative figure derived from a decision (headers, `durationUntilReset`)
   * is computed from this instant, never from a later clock reading.
   */
  readonly now: number;
  /** leaky-bucket only: ms a shaping caller waits before forwarding this request (its turn in the queue). */
  readonly delay?: number;
  /** Present only when the answer did not come from a normal evaluation. */
  readonly reason?: DecisionReason;
  /**
   * Present (with reason `blocked`) on the one denial that started the key's penalty
   * (`blockDuration`): the first denial by its quota; the denials during the block do not carry it.
   */
  readonly blockStarted?: true;
}
