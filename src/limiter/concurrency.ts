/**
 * Concurrency slots through the engine: at most `limit` holders of a key at once, across every
 * process sharing the store. `acquire` takes a slot for a permit id, `release` frees it from any
 * process; a slot not released expires after its `ttl`, so a holder that dies frees it without
 * anyone's help. Both go to the store through the guard (deadline, bound on calls in flight,
 * breaker), and what the store could not answer is answered by the call's failure mode:
 *
 * - `open`: granted, unchecked (`held` 0: unknown); its release is tried on the store, a no-op there;
 * - `closed`: refused, retry in a second;
 * - `local`: decided on an in-process table holding at most ⌈limit / nodes⌉ slots of the key (the
 *   nodes sharing the store as last counted, at least `expectedNodes`), released there too;
 * - `throw`: the store's error.
 *
 * The memory store decides in-process and cannot fail: no guard, no failure mode.
 */
import { randomBytes } from 'node:crypto';
import { currentTime } from '../clock.js';
import { InvalidKeyError, InvalidOptionError, describeValue } from '../errors.js';
import { parseDuration } from '../duration.js';
import { checkOptions, checkWholeNumber } from '../options.js';
import { SlotTable } from '../store/concurrency-slots.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../store/slots.js';
import type { MaybePromise } from '../store/types.js';
import { checkDeadline, checkFailureMode, DEGRADED_REASON, FAIL_CLOSED_RETRY_MS, type DegradedReason, type LimiterFailureMode } from './failure-modes.js';
import { checkKey, checkNow } from './checks.js';
import type { GuardLayer } from './guard-layer.js';
import { unanswered } from './store-guard.js';
import type { StoreLayer } from './store-layer.js';

/** Most slots of one key: a store keeps one entry per slot held. */
export const MAX_SLOTS = 100_000;
/** Longest slot ttl: a day. A slot is held for a request or a job, and its ttl is how long a dead holder keeps it. */
export const MAX_SLOT_TTL_MS = 86_400_000;
/** A permit id: 1 to 128 letters, digits and `_ . : -` (generated ids are 22 base64url characters). */
export const PERMIT_ID_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Options of {@link ConcurrencySlots.acquire}. */
export interface AcquireOptions {
  /** Most slots of this key held at once: an integer from 1 to {@link MAX_SLOTS}. */
  readonly limit: number;
  /** How long the slot is held unless released first: ms, or a duration like `'30s'` (1 ms to 1 day). */
  readonly ttl: number | string;
  /** The permit's id (default: a random one). An id already holding a slot of this key renews it: a retried acquire counts once. */
  readonly id?: string;
  /** Decision time in epoch ms (tests, replays). Default: the limiter's clock or the store's time. */
  readonly now?: number;
  readonly failureMode?: LimiterFailureMode;
  readonly deadlineMs?: number;
}

/** Options of a release: the call's time and how a failing store is answered. */
export type ReleaseOptions = Pick<AcquireOptions, 'now' | 'failureMode' | 'deadlineMs'>;
/** Options of {@link ConcurrencySlots.held}: a look has no failure mode (it rejects when the store cannot answer). */
export type HeldOptions = Pick<AcquireOptions, 'now' | 'deadlineMs'>;
/** Most keys one {@link ConcurrencySlots.held} call counts. */
export const MAX_HELD_KEYS = 1_000;

/** The answer to an acquire. */
export interface Permit {
  /** Whether a slot was granted: hold it, then release it. */
  readonly allowed: boolean;
  readonly limit: number;
  /** Slots of the key held after this call, this one included when granted (0 when a failure mode answered `open` or `closed`: unknown). */
  readonly held: number;
  /** When refused: ms until a held slot expires at the latest (a release may free one sooner); 0 when granted. */
  readonly retryAfter: number;
  /** The permit's id, to release it from any process. */
  readonly id: string;
  /** When granted: when the slot expires unless released (epoch ms); 0 when refused. */
  readonly expiresAt: number;
  /** The decision's time (epoch ms). */
  readonly now: number;
  /** Set when a failure mode answered instead of the store. */
  readonly reason?: DegradedReason;
  /** Releases the slot ({@link ConcurrencySlots.release}); a refused permit resolves to false at once. */
  release(options?: ReleaseOptions): Promise<boolean>;
}

/** What the slots need of the limiter they belong to. */
export interface SlotSettings {
  /** The engine's one door to the store. */
  readonly storeLayer: StoreLayer;
  readonly storeName: string;
  /** The guard layer; undefined on the memory store. */
  readonly guard: GuardLayer | undefined;
  readonly failureMode: LimiterFailureMode;
  readonly deadlineMs: number;
  readonly clock: (() => number) | undefined;
}

const ACQUIRE_OPTIONS: readonly string[] = ['limit', 'ttl', 'id', 'now', 'failureMode', 'deadlineMs'];
const RELEASE_OPTIONS: readonly string[] = ['now', 'failureMode', 'deadlineMs'];
const HELD_OPTIONS: readonly string[] = ['now', 'deadlineMs'];

interface CheckedAcquire extends SlotRequest {
  readonly now: number | undefined;
  readonly failureMode: LimiterFailureMode;
  readonly deadlineMs: number;
}

export class ConcurrencySlots {
  /** The `local` failure mode's table, made on first use. */
  private local: SlotTable | undefined;

  constructor(private readonly settings: SlotSettings) {}

  acquire(key: string, options: AcquireOptions): Promise<Permit> {
    return promised(() => {
      const checkedKey = checkKey(key);
      const request = this.checkAcquire(options);
      const answered = this.guarded<SlotAnswer>(
        (door) => door.acquireSlot(checkedKey, request, request.now),
        request,
        'acquire',
        (failureMode, at) => this.fallbackAcquire(checkedKey, request, failureMode, at),
      );
      const permit = (answer: SlotAnswer & { reason?: DegradedReason }): Permit => this.permit(checkedKey, request, answer);
      return answered instanceof Promise ? answered.then(permit) : permit(answered);
    });
  }

  /**
   * Frees `id`'s slot of `key`. Resolves to true when a slot held by that id was freed, false when
   * there was none (released already, expired, never granted): releasing is idempotent. When the
   * store cannot answer, the slot is freed where the `local` failure mode may hold it and the
   * answer is false (the store's slot, if any, expires at its ttl), or the store's error under `throw`.
   */
  release(key: string, id: string, options?: ReleaseOptions): Promise<boolean> {
    return promised(() => {
      const checkedKey = checkKey(key);
      const checkedId = checkPermitId(id);
      const call = this.checkCall(options, RELEASE_OPTIONS, 'release');
      // A slot the local failure mode granted during an outage is freed here whatever the store says.
      const freedLocally = this.local?.release(checkedKey, checkedId, call.now ?? currentTime()).released === true;
      const answered = this.guarded<SlotRelease>((door) => door.releaseSlot(checkedKey, checkedId, call.now), call, 'release', () => ({ released: false, held: 0 }));
      const released = (answer: SlotRelease): boolean => answer.released || freedLocally;
      return answered instanceof Promise ? answered.then(released) : released(answered);
    });
  }

  /**
   * How many slots of each of `keys` are held now, in one guarded store call; rejects when the
   * store cannot answer (a look has nothing to fall back on), or does not count slots.
   */
  held(keys: readonly string[], options?: HeldOptions): Promise<number[]> {
    return promised(() => {
      if (!Array.isArray(keys) || keys.length > MAX_HELD_KEYS) throw new InvalidOptionError(`heldSlots takes an array of at most ${MAX_HELD_KEYS} keys, got ${describeValue(keys)}`);
      const checkedKeys = keys.map((key) => checkKey(key));
      const call = { ...this.checkCall(options, HELD_OPTIONS, 'heldSlots'), failureMode: 'throw' as const };
      if (!this.settings.storeLayer.countsSlots) throw new InvalidOptionError(`the ${this.settings.storeName} store does not count concurrency slots; use the memory or the Redis store`);
      return this.guarded<number[]>((door) => door.heldSlots(checkedKeys, call.now), call, 'held', () => []);
    });
  }

  /** One slot call on the store, under the guard when there is one. */
  private guarded<T>(
    call: (door: StoreLayer) => MaybePromise<T>,
    checked: { readonly now: number | undefined; readonly failureMode: LimiterFailureMode; readonly deadlineMs: number },
    operation: 'acquire' | 'release' | 'held',
    fallback: (failureMode: Exclude<LimiterFailureMode, 'throw'>, at: number) => T,
  ): MaybePromise<T> {
    const { storeLayer: door, guard, storeName } = this.settings;
    if (!door.holdsSlots) throw new InvalidOptionError(`the ${storeName} store does not hold concurrency slots; use the memory, Redis or Memcached store for acquire and release`);
    if (guard === undefined) return call(door);
    return guard.guard.run(
      () => call(door),
      checked.deadlineMs,
      (cause, error) => (checked.failureMode === 'throw' ? unanswered(cause, error) : fallback(checked.failureMode, checked.now ?? currentTime())),
      operation,
    );
  }

  private fallbackAcquire(key: string, request: SlotRequest, failureMode: Exclude<LimiterFailureMode, 'throw'>, at: number): SlotAnswer & { reason: DegradedReason } {
    const reason = DEGRADED_REASON[failureMode];
    if (failureMode === 'open') return { allowed: true, held: 0, retryAfter: 0, expiresAt: at + request.ttlMs, now: at, reason };
    if (failureMode === 'closed') return { allowed: false, held: 0, retryAfter: FAIL_CLOSED_RETRY_MS, expiresAt: 0, now: at, reason };
    const share = Math.max(1, Math.ceil(request.limit / (this.settings.guard?.nodesSharing() ?? 1)));
    return { ...(this.local ??= new SlotTable()).acquire(key, { ...request, limit: share }, at), reason };
  }

  private permit(key: string, request: CheckedAcquire, answer: SlotAnswer & { reason?: DegradedReason }): Permit {
    const { allowed, held, retryAfter, expiresAt, now, reason } = answer;
    const release = allowed ? (options?: ReleaseOptions): Promise<boolean> => this.release(key, request.id, options) : (): Promise<boolean> => Promise.resolve(false);
    const permit = { allowed, limit: request.limit, held, retryAfter, id: request.id, expiresAt, now, release };
    return reason === undefined ? permit : { ...permit, reason };
  }

  private checkAcquire(options: AcquireOptions): CheckedAcquire {
    if (typeof options !== 'object' || options === null) {
      throw new InvalidOptionError(`acquire needs { limit, ttl } (e.g. { limit: 10, ttl: '30s' }), got ${describeValue(options)}`);
    }
    const call = this.checkCall(options, ACQUIRE_OPTIONS, 'acquire');
    const limit = checkWholeNumber(options.limit, { name: 'acquire: limit', min: 1, max: MAX_SLOTS, meaning: 'slots of the key held at once' });
    const ttlMs = checkSlotTtl(options.ttl, 'acquire: ttl');
    const id = options.id === undefined ? newPermitId() : checkPermitId(options.id);
    return { ...call, limit, ttlMs, id };
  }

  private checkCall(options: ReleaseOptions | undefined, names: readonly string[], where: string): Pick<CheckedAcquire, 'now' | 'failureMode' | 'deadlineMs'> {
    if (options !== undefined) checkOptions(where, options, names, where === 'acquire' ? "{ limit: 10, ttl: '30s' }" : '{ now: Date.now() }', 'option');
    const { failureMode, deadlineMs, clock } = this.settings;
    return {
      now: options?.now !== undefined ? checkNow(options.now) : clock === undefined ? undefined : checkNow(clock()),
      failureMode: options?.failureMode === undefined ? failureMode : checkFailureMode(options.failureMode, `${where}: failureMode`),
      deadlineMs: options?.deadlineMs === undefined ? deadlineMs : checkDeadline(options.deadlineMs, `${where}: deadlineMs`),
    };
  }
}

/** A slot's ttl: ms or a duration with a unit, 1 ms to a day. */
export function checkSlotTtl(value: unknown, where: string): number {
  const ms = parseDuration(value);
  if (typeof ms === 'string') throw new InvalidOptionError(`${where} ${ms}`);
  if (ms > MAX_SLOT_TTL_MS) throw new InvalidOptionError(`${where} must be at most 1d (${MAX_SLOT_TTL_MS} ms): it is how long a holder that died keeps its slot, got ${describeValue(value)}`);
  return ms;
}

export function checkPermitId(id: unknown): string {
  if (typeof id === 'string' && PERMIT_ID_PATTERN.test(id)) return id;
  throw new InvalidKeyError(`a permit id is 1 to 128 letters, digits, '_', '.', ':' or '-' (as acquire answered it), got ${describeValue(id)}`);
}

/** 128 random bits, base64url: ids of live permits never meet. */
function newPermitId(): string {
  return randomBytes(16).toString('base64url');
}

function promised<T>(run: () => MaybePromise<T>): Promise<T> {
  try {
    return Promise.resolve(run());
  } catch (error) {
    return Promise.reject(error);
  }
}
