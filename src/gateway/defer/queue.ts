/**
 * The deferred queue: throttled requests kept durably in a Redis stream per queue (one per rule),
 * each with a ticket whose hash tells where it stands and, once delivered, holds the upstream's
 * answer for `resultTtlMs`. The bound is checked and the entry appended in one script, so
 * concurrent gateways never push a queue past `maxLength`.
 */
import { Cluster, Redis } from 'ioredis';
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkOptions, checkWholeNumber, checkWholeNumbers, type WholeNumberRange } from '../../options.js';
import { checkQueueName, newTicket, parseTicket, queueKeys, type QueueKeys } from './keys.js';
import { callHook, hooksOption, shortName } from './queue-options.js';
import { storableRequest } from './request.js';
import { withScripts, type QueueScripts } from './scripts.js';
import { ticketStatus } from './ticket-state.js';
import type { DeferredRequestInput, EnqueueResult, TicketStatus } from './types.js';

/** Metrics hooks of the queue; each is called after the fact and may not throw into the queue. */
export interface DeferredQueueHooks {
  enqueued(queueName: string, ticket: string): void;
  /** A request refused because its queue was full (the gateway answers 429). */
  refused(queueName: string): void;
  /** The queue's length after an enqueue, or after the worker finished an entry. */
  queueLength(queueName: string, length: number): void;
}

/** Options of {@link createDeferredQueue}. */
export interface DeferredQueueOptions {
  /** An ioredis client or Cluster (the queue does not close it; the drain worker duplicates it for blocking reads). */
  readonly redis: Redis | Cluster;
  /** Prefix of every key, default `tollgate:defer:`. */
  readonly prefix?: string;
  /** Most entries a queue holds (waiting or being delivered); past it, enqueue refuses. Default 10,000. */
  readonly maxLength?: number;
  /** How long a result (delivered or failed) stays readable, in ms. Default 86,400,000 (a day). */
  readonly resultTtlMs?: number;
  /** Largest request body kept, in bytes. Default 1,048,576 (1 MiB). */
  readonly maxBodyBytes?: number;
  /** Most bytes of the upstream's body kept in a result. Default 1,048,576 (1 MiB). */
  readonly maxResultBodyBytes?: number;
  /** Epoch ms, for the times recorded in tickets. Default `Date.now`. */
  readonly clock?: () => number;
  readonly hooks?: Partial<DeferredQueueHooks>;
}

export interface DeferredQueue {
  /**
   * Stores `request` at the end of `queueName`'s queue and answers its ticket and position, or
   * `{ accepted: false }` when the queue holds `maxLength` entries (answer 429). Bad input rejects with
   * `InvalidDeferredRequestError` (400) or `DeferredBodyTooLargeError` (413), before Redis is asked.
   */
  enqueue(queueName: string, request: DeferredRequestInput, options?: { readonly maxLength?: number }): Promise<EnqueueResult>;
  /** Where `ticket` stands: queued (with its position), delivering, delivered (with the upstream's answer), failed, or unknown. */
  status(ticket: string): Promise<TicketStatus>;
  /** Entries in `queueName`'s queue: waiting plus being delivered. */
  length(queueName: string): Promise<number>;
}

const OPTION_NAMES = ['redis', 'prefix', 'maxLength', 'resultTtlMs', 'maxBodyBytes', 'maxResultBodyBytes', 'clock', 'hooks'];
const HOOK_NAMES = ['enqueued', 'refused', 'queueLength'];
const WHERE = 'createDeferredQueue';
const MAX_LENGTH_LIMIT = 10_000_000;
const DAY_MS = 86_400_000;
const MIB = 1_048_576;

/** The queue's whole-number options: their ranges and defaults. */
const QUEUE_NUMBERS = {
  maxLength: { min: 1, max: MAX_LENGTH_LIMIT, fallback: 10_000 },
  resultTtlMs: { min: 1_000, max: 365 * DAY_MS, fallback: DAY_MS },
  maxBodyBytes: { min: 0, max: 512 * MIB, fallback: MIB },
  maxResultBodyBytes: { min: 0, max: 512 * MIB, fallback: MIB },
} as const satisfies Record<string, WholeNumberRange>;

/** Settings a drain worker reads off its queue. */
export interface QueueSettings {
  readonly maxResultBodyBytes: number;
  readonly resultTtlMs: number;
  readonly clock: () => number;
  readonly hooks: Partial<DeferredQueueHooks>;
}

/** The queue over Redis. The drain worker uses its client, scripts, keys and settings. */
export class RedisDeferredQueue implements DeferredQueue {
  readonly scripts: QueueScripts;
  private readonly maxLength: number;
  private readonly maxBodyBytes: number;

  constructor(
    readonly redis: Redis | Cluster,
    private readonly prefix: string,
    readonly settings: QueueSettings,
    limits: { maxLength: number; maxBodyBytes: number },
  ) {
    this.scripts = withScripts(redis);
    this.maxLength = limits.maxLength;
    this.maxBodyBytes = limits.maxBodyBytes;
  }

  keys(queueName: string): QueueKeys {
    return queueKeys(this.prefix, queueName);
  }

  async enqueue(queueName: string, request: DeferredRequestInput, options: { readonly maxLength?: number } = {}): Promise<EnqueueResult> {
    checkQueueName(queueName);
    checkOptions('enqueue', options, ['maxLength'], '{ maxLength: 100 }');
    const maxLength = checkWholeNumber(options.maxLength, { ...QUEUE_NUMBERS.maxLength, name: 'enqueue: maxLength', fallback: this.maxLength });
    const stored = storableRequest(request, this.maxBodyBytes);
    const keys = this.keys(queueName);
    const ticket = newTicket(queueName);
    const secret = parseTicket(ticket)!.secret;
    const reply = await this.scripts.tollgateDeferEnqueue(
      keys.stream, keys.meta, keys.ticket(secret),
      maxLength, ticket, stored.method, stored.path, JSON.stringify(stored.headers), stored.body, this.settings.clock(),
    );
    const [accepted, length, id, position] = reply;
    callHook(this.settings.hooks.queueLength, queueName, length);
    if (accepted !== 1) {
      callHook(this.settings.hooks.refused, queueName);
      return { accepted: false, length, maxLength };
    }
    callHook(this.settings.hooks.enqueued, queueName, ticket);
    return { accepted: true, ticket, id: String(id), position: Number(position), length };
  }

  async status(ticket: string): Promise<TicketStatus> {
    const parsed = parseTicket(ticket);
    if (parsed === undefined) return { state: 'unknown', ticket: String(ticket) };
    const keys = this.keys(parsed.queueName);
    // Same slot (the hash tag), so one pipeline works on a Cluster too.
    const replies = await this.redis.pipeline().hgetallBuffer(keys.ticket(parsed.secret)).hget(keys.meta, 'finished').exec();
    const [fieldsReply, finishedReply] = replies ?? [];
    if (fieldsReply?.[0]) throw fieldsReply[0];
    const fields = (fieldsReply?.[1] ?? {}) as Record<string, Buffer>;
    return ticketStatus(ticket, fields, Number(finishedReply?.[1] ?? 0));
  }

  length(queueName: string): Promise<number> {
    checkQueueName(queueName);
    return this.redis.xlen(this.keys(queueName).stream);
  }
}

/** Creates a deferred queue on `options.redis`. Options are checked at once (`InvalidOptionError`). */
export function createDeferredQueue(options: DeferredQueueOptions): DeferredQueue {
  checkOptions(WHERE, options, OPTION_NAMES, '{ redis: new Redis(url), maxLength: 1000 }');
  if (!(options.redis instanceof Redis) && !(options.redis instanceof Cluster)) {
    throw new InvalidOptionError(`${WHERE}: redis must be an ioredis Redis or Cluster client, got ${describeValue(options.redis)}`);
  }
  const prefix = shortName(WHERE, 'prefix', options.prefix, 'tollgate:defer:', /^[^{}\s]{0,200}$/, 'a string of at most 200 characters without braces or spaces');
  const { maxLength, resultTtlMs, maxBodyBytes, maxResultBodyBytes } = checkWholeNumbers(QUEUE_NUMBERS, (name) => options[name], (name) => `${WHERE}: ${name}`);
  if (options.clock !== undefined && typeof options.clock !== 'function') throw new InvalidOptionError(`${WHERE}: clock must be a function returning epoch ms, got ${describeValue(options.clock)}`);
  const hooks = hooksOption<DeferredQueueHooks>(WHERE, options.hooks, HOOK_NAMES);
  const settings: QueueSettings = { maxResultBodyBytes, resultTtlMs, clock: options.clock ?? Date.now, hooks };
  return new RedisDeferredQueue(options.redis, prefix, settings, { maxLength, maxBodyBytes });
}
