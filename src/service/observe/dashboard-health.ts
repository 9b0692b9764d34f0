/**
 * The store's health as the dashboard shows it, read from the limiter (`health()`) once per
 * snapshot: the breaker's state, how long since the store last answered, the last error, and the
 * fallback decisions per second (the increase of the limiter's fallback totals between two
 * readings). Nothing here grows: one previous reading is kept.
 */
import type { BreakerState, DegradedReason, FallbackCause, StoreHealthSnapshot } from '../../limiter/index.js';

/** The failure modes' answers, as counted per second (a check's `result.degraded`). */
export const DEGRADED_REASONS: readonly DegradedReason[] = ['fail-open', 'fail-closed', 'local-fallback'];
/** Why a store call was answered by a failure mode (the limiter's fallback causes). */
export const FALLBACK_CAUSES: readonly FallbackCause[] = ['timeout', 'error', 'breaker-open', 'overload'];
/** Longest last-error message sent (messages are text, shown as text; long ones are cut). */
const MAX_ERROR_CHARS = 300;

export type CauseCounts = Record<FallbackCause, number>;

export const zeroCauses = (): CauseCounts => ({ timeout: 0, error: 0, 'breaker-open': 0, overload: 0 });

/** The `health` part of a snapshot. */
export interface HealthInfo {
  readonly breaker: BreakerState;
  /** Epoch ms of the store's last answer; null before the first (and always for the memory store). */
  readonly lastHealthyAt: number | null;
  /** ms since then; null when `lastHealthyAt` is. */
  readonly sinceHealthyMs: number | null;
  /** While the breaker is not closed: ms since the store last answered (or since start, if never). */
  readonly unhealthyForMs: number | null;
  readonly lastFailureAt: number | null;
  readonly lastError: string | null;
  readonly inFlight: number;
  /** Fallback decisions since start, by cause, and all causes summed. */
  readonly fallbacks: CauseCounts;
  readonly fallbacksTotal: number;
}

/** Follows the limiter's fallback totals: what each second added. */
export class FallbackRate {
  private seen: CauseCounts | undefined;

  /** The increase since the previous reading, by cause (the first reading counts from zero). */
  delta(health: StoreHealthSnapshot): CauseCounts {
    const previous = this.seen ?? zeroCauses();
    const delta = zeroCauses();
    const seen = zeroCauses();
    for (const cause of FALLBACK_CAUSES) {
      const total = health.fallbacks[cause];
      delta[cause] = Math.max(0, total - previous[cause]);
      seen[cause] = Math.max(total, previous[cause]);
    }
    this.seen = seen;
    return delta;
  }
}

export const sumCauses = (counts: CauseCounts): number => FALLBACK_CAUSES.reduce((sum, cause) => sum + counts[cause], 0);

/**
 * The health part of a snapshot. A memory store always answers (it is in the process): the time
 * since it was healthy means nothing there, and is null.
 */
export function healthInfo(health: StoreHealthSnapshot, options: { memory: boolean; startedAt: number; now: number }): HealthInfo {
  const { memory, startedAt, now } = options;
  const lastHealthyAt = memory ? undefined : health.lastHealthyAt;
  const error = health.lastError;
  return {
    breaker: health.breaker,
    lastHealthyAt: lastHealthyAt ?? null,
    sinceHealthyMs: lastHealthyAt === undefined ? null : Math.max(0, now - lastHealthyAt),
    unhealthyForMs: health.breaker === 'closed' ? null : Math.max(0, now - (lastHealthyAt ?? startedAt)),
    lastFailureAt: health.lastFailureAt ?? null,
    lastError: error === undefined ? null : error.length > MAX_ERROR_CHARS ? `${error.slice(0, MAX_ERROR_CHARS)}…` : error,
    inFlight: health.inFlight,
    fallbacks: { ...zeroCauses(), ...health.fallbacks },
    fallbacksTotal: sumCauses(health.fallbacks),
  };
}
