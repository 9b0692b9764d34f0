/** The default wait of the client: a timer that an `AbortSignal` cancels at once. */

/**
 * Resolves after `ms`, or rejects with `signal.reason` as soon as `signal` aborts (at once if it
 * already has). The timer and the listener are removed either way: an aborted wait leaves nothing
 * behind to fire later.
 */
export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted === true) return Promise.reject(signal.reason);
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
