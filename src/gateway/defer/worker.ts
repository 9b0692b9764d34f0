/**
 * The drain worker: one consumer of a queue's consumer group that replays deferred requests
 * upstream, one at a time and in order, at the rate `admit` allows. At least once: an entry is
 * acknowledged only together with its recorded result, so a crash leaves it pending, and the next
 * worker (or this one restarted) delivers it again with the same idempotency key.
 */
import { once } from 'node:events';
import type { Cluster, Redis } from 'ioredis';
import { abortableSleep } from './backoff.js';
import { deliverEntry, type DeliveryContext } from './delivery.js';
import { callHook } from './queue-options.js';
import { ensureGroup, readNew, readOwnPending, reclaimIdle, type StreamEntry, type StreamReader } from './stream.js';
import { workerSettings, type DrainWorkerOptions, type WorkerSettings } from './worker-options.js';

export interface DrainWorker {
  readonly consumer: string;
  /**
   * Stops the worker: waits for admission and backoff end at once; a delivery in flight gets
   * `stopGraceMs` to finish and be recorded, then is abandoned (left pending, to be reclaimed).
   * Resolves when the worker has stopped, at most about twice `stopGraceMs` later; no timer is left.
   */
  stop(): Promise<void>;
}

/** Resolves true when `promise` settles within `ms`, false otherwise (its timer cleared either way). */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

class RedisDrainWorker implements DrainWorker {
  readonly consumer: string;
  private readonly stopping = new AbortController();
  private readonly abandoning = new AbortController();
  private readonly reader: StreamReader;
  /** What every delivery shares; each adds its entry's `lost` signal. */
  private readonly context: Omit<DeliveryContext, 'lost' | 'wait'>;
  private readonly running: Promise<void>;
  /** False until this consumer's own pending entries (left by a crash) have been re-read. */
  private ownPendingDone = false;
  private lastReclaimAt = -Infinity;

  constructor(private readonly settings: WorkerSettings) {
    this.consumer = settings.consumer;
    const redis = settings.queue.redis;
    const keys = settings.queue.keys(settings.queueName);
    // Blocking reads hold their connection: they get one of their own.
    const blocking: Redis | Cluster = redis.duplicate();
    // Its failures surface as the reads' rejections (the loop waits and retries); without a
    // listener ioredis would print every reconnect attempt as an unhandled error event.
    blocking.on('error', () => undefined);
    this.reader = { redis, blocking, stream: keys.stream, group: settings.group, consumer: settings.consumer };
    this.context = { settings, keys, stopping: this.stopping.signal, abandoning: this.abandoning.signal };
    this.running = this.run();
  }

  async stop(): Promise<void> {
    let closed: Promise<unknown> = Promise.resolve();
    if (!this.stopping.signal.aborted) {
      this.stopping.abort();
      const blocking = this.reader.blocking;
      if (blocking.status !== 'end') closed = once(blocking, 'end');
      // Ends a blocking read at once.
      blocking.disconnect();
    }
    if (!(await settlesWithin(this.running, this.settings.stopGraceMs))) {
      this.abandoning.abort();
      await settlesWithin(this.running, Math.max(this.settings.stopGraceMs, 100));
    }
    // The blocking connection's own timers go with it.
    await settlesWithin(closed, 1_000);
  }

  /** Waits `ms`; false when `signal` (default: the worker stopping) aborts first. */
  private async wait(ms: number, signal = this.stopping.signal): Promise<boolean> {
    if (this.settings.sleep === undefined) return abortableSleep(ms, signal);
    await this.settings.sleep(ms, signal);
    return !signal.aborted;
  }

  /** Own pending entries first, then one idle on a dead consumer (every reclaimIntervalMs), then a new one. */
  private async next(): Promise<StreamEntry | undefined> {
    if (!this.ownPendingDone) {
      const own = await readOwnPending(this.reader);
      if (own !== undefined) return own;
      this.ownPendingDone = true;
    }
    if (performance.now() - this.lastReclaimAt >= this.settings.reclaimIntervalMs) {
      const reclaimed = await reclaimIdle(this.reader, this.settings.minIdleMs);
      // Found one: look again at once, the dead consumer may have left more (older than any new entry).
      this.lastReclaimAt = reclaimed === undefined ? performance.now() : -Infinity;
      if (reclaimed !== undefined) return reclaimed;
    }
    return readNew(this.reader, this.settings.blockMs);
  }

  private async run(): Promise<void> {
    let groupReady = false;
    while (!this.stopping.signal.aborted) {
      try {
        if (!groupReady) await ensureGroup(this.reader);
        groupReady = true;
        const entry = await this.next();
        if (entry !== undefined) await this.process(entry);
      } catch (error) {
        if (this.stopping.signal.aborted) break;
        callHook(this.settings.hooks.error, error);
        // Whatever was being delivered is still pending on us: read it again first. And the
        // group may be gone with its stream (a flushed or restarted Redis): make it again.
        this.ownPendingDone = false;
        groupReady = false;
        await this.wait(this.settings.backoff.baseMs);
      }
    }
  }

  /**
   * Delivers one entry, keeping it from looking idle (and being reclaimed) however long it waits.
   * The heartbeat resets the idle time only while the entry is still this worker's: once another
   * worker has taken it over (this one was silent past minIdleMs), it stays with that one, and this
   * one starts no attempt of it (the begin script checks the owner too).
   */
  private async process(entry: StreamEntry): Promise<void> {
    const lost = new AbortController();
    // Ends this entry's waits: the worker stopping, or the entry lost.
    const halt = new AbortController();
    const onStop = (): void => halt.abort();
    this.stopping.signal.addEventListener('abort', onStop, { once: true });
    const { queue, group, queueName, hooks } = this.settings;
    let finished = false;
    const heartbeat = setInterval(() => {
      queue.scripts.tollgateDeferHeartbeat(this.reader.stream, group, entry.id, this.consumer).then(
        (held) => {
          // A late answer after the entry was finished (acknowledged: no longer pending) says nothing.
          if (held === 1 || lost.signal.aborted || finished) return;
          lost.abort();
          halt.abort();
          clearInterval(heartbeat);
          callHook(hooks.lost, queueName, entry.id);
        },
        (error: unknown) => callHook(hooks.error, error),
      );
    }, Math.max(5, Math.floor(this.settings.minIdleMs / 3)));
    try {
      await deliverEntry({ ...this.context, lost: lost.signal, wait: (ms) => this.wait(ms, halt.signal) }, entry);
    } finally {
      finished = true;
      clearInterval(heartbeat);
      this.stopping.signal.removeEventListener('abort', onStop);
    }
  }
}

/**
 * Starts a drain worker on `options.queueName` (options checked at once: `InvalidOptionError`).
 * It runs until `stop()`; Redis errors and `admit` errors are reported to `hooks.error` and ridden out.
 */
export function startDrainWorker(options: DrainWorkerOptions): DrainWorker {
  return new RedisDrainWorker(workerSettings(options));
}
