/**
 * SIGSTOP that has taken hold. kill() returns once the signal is queued; a multi-threaded server
 * (memcached's workers) stops thread by thread as each is scheduled, so on a loaded machine one
 * of its threads may still answer a request sent right after kill(). This waits until the kernel
 * reports every thread stopped.
 */
import { readFileSync, readdirSync } from 'node:fs';

const STOP_WAIT_MS = 5_000;

function everyThreadStopped(pid: number): boolean {
  return readdirSync(`/proc/${pid}/task`).every((task) => {
    // The state is the field after the command name, which is in parentheses and may hold spaces.
    const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'T' || state === 't';
  });
}

/** Sends SIGSTOP to `pid` and resolves once all its threads are stopped. */
export async function stopProcess(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  const limit = Date.now() + STOP_WAIT_MS;
  while (!everyThreadStopped(pid)) {
    if (Date.now() > limit) throw new Error(`process ${pid} was sent SIGSTOP but not every thread is stopped after ${STOP_WAIT_MS} ms`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
