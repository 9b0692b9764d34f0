/** Running a task one at a time, for the rules watcher and the rules sync. */

/**
 * Wraps `task` so that runs never overlap. A call while a run is under way gets the run after it
 * (one, however many calls came meanwhile), so what the caller changed before calling is seen
 * by the run its promise waits for.
 */
export function oneAtATime(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  const run = (): Promise<void> => {
    if (running === undefined) {
      running = task().finally(() => {
        running = undefined;
      });
      return running;
    }
    const startNext = (): Promise<void> => {
      next = undefined;
      return run();
    };
    next ??= running.then(startNext, startNext);
    return next;
  };
  return run;
}
