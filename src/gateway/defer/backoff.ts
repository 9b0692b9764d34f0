/** Waiting: exponential backoff with jitter between delivery attempts, and a sleep a stop can cut short. */

/** Backoff settings, in milliseconds. */
export interface BackoffSettings {
  readonly baseMs: number;
  readonly maxMs: number;
}

/**
 * The wait after failed attempt `attempt` (1, 2, ...): base × 2^(attempt−1), capped at max, then
 * "equal jitter" (half fixed, half random) so workers spread out yet each wait keeps growing.
 */
export function backoffDelay(attempt: number, settings: BackoffSettings, random: () => number): number {
  const ceiling = Math.min(settings.maxMs, settings.baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** Waits `ms`; resolves true when the time passed, false at once when `signal` aborts. Leaves no timer behind. */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
