/** The drain worker's options, checked once when it starts. */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkOptions, checkWholeNumber, checkWholeNumbers, type WholeNumberRange } from '../../options.js';
import { checkQueueName } from './keys.js';
import { callback, hooksOption, shortName } from './queue-options.js';
import { RedisDeferredQueue, type DeferredQueue } from './queue.js';
import type { Admission, DeferredEntry, DeliveryResponse } from './types.js';

/** Metrics hooks of the drain worker; each is called after the fact and may not throw into the worker. */
export interface DrainWorkerHooks {
  delivered(queueName: string, ticket: string, status: number, attempts: number): void;
  /** An attempt failed (5xx or network error) and another follows after `delayMs`. */
  retried(queueName: string, ticket: string, attempt: number, delayMs: number, error: string): void;
  /** The last attempt failed: the ticket is marked failed. */
  failed(queueName: string, ticket: string, attempts: number, error: string): void;
  /** An error the worker rode out (Redis unreachable, `admit` threw); it waits and tries again. */
  error(error: unknown): void;
  /**
   * Another worker took over the entry `id` this one held (this one was silent past `minIdleMs`: a
   * stalled process, a cut link): this one starts no attempt of it any more, the other delivers it.
   */
  lost(queueName: string, id: string): void;
}

/** Options of {@link startDrainWorker}. */
export interface DrainWorkerOptions {
  /** The queue, from `createDeferredQueue`. */
  readonly queue: DeferredQueue;
  readonly queueName: string;
  /** This worker's name in the consumer group; a restarted worker with the same name resumes its own pending entries. */
  readonly consumer: string;
  /** The consumer group, default `tollgate-drain`. */
  readonly group?: string;
  /** Asked before every attempt: the limiter's answer for the entry's route ("at the rate the rule allows"). */
  readonly admit: (entry: DeferredEntry) => Admission | Promise<Admission>;
  /**
   * Sends the entry upstream with its ticket (the same on every attempt; `upstreamDeliverer` sends it
   * as `Tollgate-Ticket`, and as `Idempotency-Key` when the client sent none) and
   * answers the response; throws on a network error. Must give up when `signal` aborts (a stop past its grace).
   */
  readonly deliver: (entry: DeferredEntry, ticket: string, signal: AbortSignal) => Promise<DeliveryResponse>;
  /** Attempts before a ticket is marked failed, counted across workers and restarts. Default 5. */
  readonly maxAttempts?: number;
  /** First wait after a failed attempt, in ms; doubles each time. Default 500. */
  readonly backoffBaseMs?: number;
  /** Longest wait between attempts, in ms. Default 30,000. */
  readonly backoffMaxMs?: number;
  /** An entry pending this long (ms) on another consumer is taken over: that consumer is presumed dead. Default 30,000. */
  readonly minIdleMs?: number;
  /** How often (ms) to look for such entries. Default 1,000. */
  readonly reclaimIntervalMs?: number;
  /** Longest blocking read for new entries, in ms. Default 1,000. */
  readonly blockMs?: number;
  /** How long `stop()` lets a delivery in flight finish before abandoning it (left pending), in ms. Default 5,000. */
  readonly stopGraceMs?: number;
  /** Waits `ms` unless `signal` aborts first (for tests). Default: a timer. */
  readonly sleep?: (ms: number, signal: AbortSignal) => Promise<unknown>;
  /** A number in [0, 1), for the backoff's jitter (for tests). Default `Math.random`. */
  readonly random?: () => number;
  readonly hooks?: Partial<DrainWorkerHooks>;
}

export interface WorkerSettings {
  readonly queue: RedisDeferredQueue;
  readonly queueName: string;
  readonly consumer: string;
  readonly group: string;
  readonly admit: DrainWorkerOptions['admit'];
  readonly deliver: DrainWorkerOptions['deliver'];
  readonly maxAttempts: number;
  readonly backoff: { readonly baseMs: number; readonly maxMs: number };
  readonly minIdleMs: number;
  readonly reclaimIntervalMs: number;
  readonly blockMs: number;
  readonly stopGraceMs: number;
  readonly sleep: ((ms: number, signal: AbortSignal) => Promise<unknown>) | undefined;
  readonly random: () => number;
  readonly hooks: Partial<DrainWorkerHooks>;
}

const WHERE = 'startDrainWorker';
const OPTION_NAMES = [
  'queue', 'queueName', 'consumer', 'group', 'admit', 'deliver', 'maxAttempts', 'backoffBaseMs', 'backoffMaxMs',
  'minIdleMs', 'reclaimIntervalMs', 'blockMs', 'stopGraceMs', 'sleep', 'random', 'hooks',
];
const HOOK_NAMES = ['delivered', 'retried', 'failed', 'error', 'lost'];
const NAME = /^[A-Za-z0-9_.:-]{1,128}$/;
const HOUR = 3_600_000;

/** The worker's whole-number options that stand alone: their ranges and defaults. */
const WORKER_NUMBERS = {
  maxAttempts: { min: 1, max: 1_000, fallback: 5 },
  backoffBaseMs: { min: 1, max: HOUR, fallback: 500 },
  minIdleMs: { min: 10, max: 24 * HOUR, fallback: 30_000 },
  blockMs: { min: 1, max: 60_000, fallback: 1_000 },
  stopGraceMs: { min: 0, max: HOUR, fallback: 5_000 },
} as const satisfies Record<string, WholeNumberRange>;

export function workerSettings(options: DrainWorkerOptions): WorkerSettings {
  checkOptions(WHERE, options, OPTION_NAMES, '{ queue, queueName, consumer, admit, deliver }');
  if (!(options.queue instanceof RedisDeferredQueue)) throw new InvalidOptionError(`${WHERE}: queue must come from createDeferredQueue(...), got ${describeValue(options.queue)}`);
  checkQueueName(options.queueName);
  const { maxAttempts, backoffBaseMs, minIdleMs, blockMs, stopGraceMs } = checkWholeNumbers(WORKER_NUMBERS, (name) => options[name], (name) => `${WHERE}: ${name}`);
  // These two are bounded by, or default to, the options above.
  const backoffMaxMs = checkWholeNumber(options.backoffMaxMs, { name: `${WHERE}: backoffMaxMs`, min: backoffBaseMs, max: 24 * HOUR, fallback: Math.max(30_000, backoffBaseMs) });
  const reclaimIntervalMs = checkWholeNumber(options.reclaimIntervalMs, { name: `${WHERE}: reclaimIntervalMs`, min: 10, max: HOUR, fallback: Math.min(1_000, minIdleMs) });
  return {
    queue: options.queue,
    queueName: options.queueName,
    consumer: shortName(WHERE, 'consumer', options.consumer, undefined, NAME, '1-128 letters, digits, "_", ".", "-" or ":"'),
    group: shortName(WHERE, 'group', options.group, 'tollgate-drain', NAME, '1-128 letters, digits, "_", ".", "-" or ":"'),
    admit: callback(WHERE, 'admit', options.admit),
    deliver: callback(WHERE, 'deliver', options.deliver),
    maxAttempts,
    backoff: { baseMs: backoffBaseMs, maxMs: backoffMaxMs },
    minIdleMs,
    reclaimIntervalMs,
    blockMs,
    stopGraceMs,
    sleep: options.sleep === undefined ? undefined : callback(WHERE, 'sleep', options.sleep),
    random: callback(WHERE, 'random', options.random, Math.random),
    hooks: hooksOption<DrainWorkerHooks>(WHERE, options.hooks, HOOK_NAMES),
  };
}
