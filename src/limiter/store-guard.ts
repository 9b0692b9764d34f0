/**
 * What stands between the limiter and a store that can fail: a deadline on every call, a bound on
 * the calls in flight, and the circuit breaker. A call that fails, times out, finds too many calls
 * out or the breaker open is answered by the caller's fallback (the failure modes, guard-layer.ts)
 * instead; the guard only says when and why. Only a failed or late call counts against the store
 * in the breaker: a call shed because too many are out (overload) never reached it.
 *
 * A reply that arrives after its deadline is dropped: the answer already given stands. Whatever
 * the late call wrote in the store (it ran atomically there) is kept; nothing is retried, so
 * nothing is counted twice. A call holds its place among the calls in flight until it settles or
 * its deadline passes, whichever is first: a store call that never settles (a custom `Store` can
 * do that) cannot keep the bound full or the breaker from probing.
 *
 * While an OpenTelemetry SDK is registered, each call is a `tollgate.store` span (tracing.ts):
 * one per call rather than per Redis batch, since a batch carries requests of several traces.
 */
import { StoreDataError, StoreUnavailableError, TollgateError } from '../errors.js';
import type { MaybePromise } from '../store/types.js';
import { ATTR, SPAN, inSpan, recordFailure, startSpan, activeTracer } from '../tracing.js';
import { CircuitBreaker, type BreakerOptions, type BreakerState, type BreakerTransition } from './breaker.js';
import { Deadlines } from './deadlines.js';
import type { Span, Tracer } from '@opentelemetry/api';

/** Why a call was answered by the fallback. */
export type FallbackCause = 'timeout' | 'error' | 'breaker-open' | 'overload';

/** What a guarded call asks of the store, as its span names it (`tollgate.store.operation`). */
export type StoreOperation = 'consume' | 'peek' | 'consume_all' | 'sync' | 'acquire' | 'release' | 'held';

/** Why the store was not asked, or its answer not waited for, in words. */
export function fallbackMessage(cause: FallbackCause): string {
  const why = cause === 'timeout' ? 'did not answer within the deadline' : cause === 'overload' ? 'has too many calls in flight' : cause === 'error' ? 'failed' : 'is failing (circuit breaker open)';
  return `the rate limit store ${why}`;
}

/** The failure mode `throw`: the store's error, or why the store was not asked. */
export function unanswered(cause: FallbackCause, error: unknown): never {
  throw error ?? new StoreUnavailableError(fallbackMessage(cause));
}

/** A snapshot of the store's health as the limiter sees it. */
export interface StoreHealthSnapshot {
  readonly breaker: BreakerState;
  /** Epoch ms of the last call the store answered; undefined before the first. */
  readonly lastHealthyAt: number | undefined;
  /** Epoch ms and message of the last failed call. */
  readonly lastFailureAt: number | undefined;
  readonly lastError: string | undefined;
  /** Store calls out now and within their deadline. */
  readonly inFlight: number;
  /** Calls answered by the fallback since start, by cause. */
  readonly fallbacks: Readonly<Record<FallbackCause, number>>;
  /**
   * The nodes sharing the store as its last heartbeat answered (this one included), which the
   * `local` failure mode divides limits by (at least `expectedNodes`); absent before the first
   * answer, or on a store that does not count nodes.
   */
  readonly liveNodes?: number;
}

export interface GuardOptions {
  readonly breaker: BreakerOptions | false;
  /** Most store calls out at once; more are answered by the fallback at once. */
  readonly maxInFlight: number;
  readonly clock: () => number;
  /** The store's name (`tollgate.store.kind` on store spans). */
  readonly storeKind: string;
}

/** Hears every breaker transition. */
export type TransitionListener = (transition: BreakerTransition) => void;

export class StoreGuard {
  private readonly breaker: CircuitBreaker | undefined;
  private readonly listeners: TransitionListener[] = [];
  private readonly maxInFlight: number;
  private readonly clock: () => number;
  private readonly storeKind: string;
  /** While tracing: the store calls started in this turn of the event loop, which the Redis store batches together. */
  private turn: { calls: number } | undefined;
  private inFlight = 0;
  /** Every call's deadline, on one timer. */
  private readonly deadlines = new Deadlines();
  private lastHealthyAt: number | undefined;
  private lastFailureAt: number | undefined;
  private lastError: string | undefined;
  private readonly fallbacks: Record<FallbackCause, number> = { timeout: 0, error: 0, 'breaker-open': 0, overload: 0 };

  constructor(options: GuardOptions) {
    this.clock = options.clock;
    this.maxInFlight = options.maxInFlight;
    this.storeKind = options.storeKind;
    this.breaker = options.breaker === false ? undefined : new CircuitBreaker(options.breaker, options.clock, (transition) => this.announce(transition));
  }

  /** Listens to breaker transitions; returns a function that stops listening. */
  onTransition(listener: TransitionListener): () => void {
    this.listeners.push(listener);
    return () => {
      const index = this.listeners.indexOf(listener);
      if (index !== -1) this.listeners.splice(index, 1);
    };
  }

  health(): StoreHealthSnapshot {
    return {
      breaker: this.breaker?.state ?? 'closed',
      lastHealthyAt: this.lastHealthyAt,
      lastFailureAt: this.lastFailureAt,
      lastError: this.lastError,
      inFlight: this.inFlight,
      fallbacks: { ...this.fallbacks },
    };
  }

  /**
   * Runs `call` against the store within `deadlineMs`; answers `fallback(cause, error)` instead
   * when the breaker is open, too many calls are out, the call fails with an outage (an
   * unavailable store, an unexpected error reply), or the deadline passes first. Errors that say
   * the *data* is wrong (a key holding another application's value) are not outages: they reject,
   * and the breaker counts the call as answered. While an SDK is registered the call is a
   * `tollgate.store` span (`operation`, `limits` decided), failed when the fallback answered.
   */
  run<T>(call: () => MaybePromise<T>, deadlineMs: number, fallback: (cause: FallbackCause, error?: unknown) => T, operation: StoreOperation = 'consume', limits = 1): MaybePromise<T> {
    const tracer = activeTracer();
    if (tracer !== undefined) return this.runTraced(tracer, call, deadlineMs, fallback, operation, limits);
    return this.runUntraced(call, deadlineMs, fallback);
  }

  private runTraced<T>(tracer: Tracer, call: () => MaybePromise<T>, deadlineMs: number, fallback: (cause: FallbackCause, error?: unknown) => T, operation: StoreOperation, limits: number): MaybePromise<T> {
    const span = startSpan(tracer, SPAN.store, {
      [ATTR.storeKind]: this.storeKind,
      [ATTR.storeOperation]: operation,
      [ATTR.limitsCount]: limits,
      [ATTR.deadlineMs]: deadlineMs,
      [ATTR.inFlight]: this.inFlight,
    });
    if (this.turn === undefined) {
      this.turn = { calls: 0 };
      setImmediate(() => (this.turn = undefined));
    }
    const turn = this.turn;
    turn.calls += 1;
    const fellBack = (cause: FallbackCause, error?: unknown): T => {
      span.setAttribute(ATTR.fallback, cause);
      recordFailure(span, error ?? new StoreUnavailableError(fallbackMessage(cause)), cause);
      return fallback(cause, error);
    };
    return inSpan(span, () => this.runUntraced(call, deadlineMs, fellBack), (ended: Span) => ended.setAttribute(ATTR.batchSize, turn.calls));
  }

  private runUntraced<T>(call: () => MaybePromise<T>, deadlineMs: number, fallback: (cause: FallbackCause, error?: unknown) => T): MaybePromise<T> {
    if (this.breaker !== undefined) {
      // While the breaker is not closed, a probe goes out only once earlier calls have settled or
      // passed their deadline: a stalled store never collects more than a few calls, however long
      // it stalls.
      if (this.breaker.state !== 'closed' && this.inFlight > 0) return this.fallBack(fallback, 'breaker-open');
      if (!this.breaker.allow()) return this.fallBack(fallback, 'breaker-open');
    }
    if (this.inFlight >= this.maxInFlight) {
      // Overload is this process's, not the store's: the breaker is not told of a failure, and a
      // probe's permit it gave is given back.
      this.breaker?.release();
      return this.fallBack(fallback, 'overload');
    }
    let pending: MaybePromise<T>;
    try {
      pending = call();
    } catch (error) {
      return this.settleError(error, fallback);
    }
    if (!(pending instanceof Promise)) {
      this.succeeded();
      return pending;
    }
    return this.race(pending, deadlineMs, fallback);
  }

  private race<T>(pending: Promise<T>, deadlineMs: number, fallback: (cause: FallbackCause, error?: unknown) => T): Promise<T> {
    this.inFlight += 1;
    return new Promise<T>((resolve, reject) => {
      // Answered once, when the call settles or at its deadline, whichever comes first: its place
      // among the calls in flight is freed then, whatever the store does after.
      let answered = false;
      const expire = (): void => {
        if (answered) return;
        answered = true;
        this.inFlight -= 1;
        const late = new StoreUnavailableError(`the store did not answer within the ${deadlineMs} ms deadline`);
        this.failed(late);
        try {
          resolve(this.fallBack(fallback, 'timeout', late));
        } catch (thrown) {
          reject(thrown);
        }
      };
      // On the guard's shared timer (deadlines.ts), checked once the I/O phase has run.
      const deadline = this.deadlines.add(deadlineMs, expire);
      pending.then(
        (value) => {
          if (answered) return;
          answered = true;
          this.inFlight -= 1;
          this.deadlines.settle(deadline);
          this.succeeded();
          resolve(value);
        },
        (error: unknown) => {
          if (answered) return;
          answered = true;
          this.inFlight -= 1;
          this.deadlines.settle(deadline);
          try {
            resolve(this.settleError(error, fallback));
          } catch (thrown) {
            reject(thrown);
          }
        },
      );
    });
  }

  /** A failed call: the fallback for an outage, the error itself otherwise. */
  private settleError<T>(error: unknown, fallback: (cause: FallbackCause, error?: unknown) => T): T {
    if (!isOutage(error)) {
      this.succeeded();
      throw error;
    }
    this.failed(error);
    return this.fallBack(fallback, 'error', error);
  }

  private fallBack<T>(fallback: (cause: FallbackCause, error?: unknown) => T, cause: FallbackCause, error?: unknown): T {
    this.fallbacks[cause] += 1;
    return fallback(cause, error);
  }

  private succeeded(): void {
    this.lastHealthyAt = this.clock();
    this.breaker?.success();
  }

  private failed(error: unknown): void {
    this.lastFailureAt = this.clock();
    this.lastError = error instanceof Error ? error.message : String(error);
    this.breaker?.failure(this.lastError);
  }

  private announce(transition: BreakerTransition): void {
    for (const listener of this.listeners) {
      try {
        listener(transition);
      } catch {
        // A failing listener (a log, a metric) must never fail a decision.
      }
    }
  }
}

/**
 * Whether a store error means the store is failing (answer by the failure mode) rather than that
 * the data is wrong or the call was bad. Input errors never reach the store: the limiter
 * validates first, and an argument the Redis script refuses anyway comes back as the caller's
 * InvalidPolicyError (store/redis/store.ts), so no request can make the store look unhealthy.
 */
export function isOutage(error: unknown): boolean {
  if (error instanceof StoreDataError) return false;
  if (error instanceof TollgateError) return error instanceof StoreUnavailableError || error.code === 'ERR_TOLLGATE_STORE_ERROR';
  return true;
}
