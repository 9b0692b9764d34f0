/**
 * The options every limiter takes (the store, the clock, what to do when the store fails, the
 * over-limit cache), validated once into {@link CoreSettings}.
 */
import type { OverLimitCacheOptions } from './over-limit.js';
import { InvalidOptionError, describeValue } from '../errors.js';
import type { BreakerOptions } from './breaker.js';
import { DEFAULT_DEADLINE_MS, checkDeadline, checkExpectedNodes, checkFailureMode, type LimiterFailureMode } from './failure-modes.js';
import { checkOptions, checkWholeNumber } from '../options.js';
import { memoryStore } from '../store/memory.js';
import { DEFAULT_HEARTBEAT_MS } from './node-count.js';
import type { Store } from '../store/types.js';

/** Options of the limiter without rules (see `createLimiter` for the full set). */
export interface LimiterCoreOptions {
  /** Where state lives. Default: a new {@link memoryStore}. */
  readonly store?: Store;
  /**
   * Time source (epoch ms) used when a call passes no `now`. Default: the store's own time
   * (the process clock for the memory store, Redis `TIME` for Redis).
   */
  readonly clock?: () => number;
  /**
   * What a decision is when the store fails, times out or its breaker is open: `'local'` (the
   * default: an in-process limit of `limit / expectedNodes`), `'open'` (admit) or `'closed'`
   * (deny). The decision says so in `reason`. Per call and per limit, `failureMode` overrides it.
   */
  readonly failureMode?: LimiterFailureMode;
  /**
   * The fewest nodes sharing the store, for `'local'`: each enforces ⌈limit / nodes⌉, where nodes is
   * the count of nodes the store's heartbeats last saw alive (see `heartbeatMs`), never below this.
   * Default 1.
   */
  readonly expectedNodes?: number;
  /**
   * How often (ms) this limiter marks its node alive in a store shared by several processes (Redis)
   * and counts the nodes alive, for `'local'`; a node is counted until it missed 3 heartbeats.
   * Default 2,000 (10 to 60,000); `false`: no heartbeat, `expectedNodes` alone.
   */
  readonly heartbeatMs?: number | false;
  /**
   * Longest wait for the store on one decision, in ms; past it the failure mode answers. Default:
   * the store's own `deadlineMs`, else 50. Per call, `deadlineMs` overrides it.
   */
  readonly deadlineMs?: number;
  /** The circuit breaker around the store (see {@link BreakerOptions}); `false` turns it off. */
  readonly breaker?: BreakerOptions | false;
  /** Most store calls out at once; more are answered by the failure mode at once. Default 10,000. */
  readonly maxInFlight?: number;
  /**
   * The local over-limit cache: a denied key is answered in-process until its retry time, with the
   * store's own answer, without a store call (limiter/over-limit.ts says where it applies). Off by
   * default; `true` for 100,000 keys, or `{ maxKeys }`.
   */
  readonly overLimitCache?: boolean | OverLimitCacheOptions;
}

const CORE_OPTIONS: readonly string[] = ['store', 'clock', 'failureMode', 'expectedNodes', 'heartbeatMs', 'deadlineMs', 'breaker', 'maxInFlight', 'overLimitCache'];

/** The validated options every limiter is built from. */
export interface CoreSettings {
  readonly store: Store;
  readonly clock: (() => number) | undefined;
  readonly failureMode: LimiterFailureMode;
  readonly expectedNodes: number;
  readonly heartbeatMs: number | false;
  readonly deadlineMs: number;
  readonly breaker: BreakerOptions | false;
  readonly maxInFlight: number;
  readonly overLimitCache: OverLimitCacheOptions | false;
}

/**
 * Validates the options shared by every limiter and refuses names outside `known`. The store is a
 * new memory store when none is given.
 */
export function limiterCoreOptions(options: LimiterCoreOptions, known: readonly string[] = CORE_OPTIONS): CoreSettings {
  checkOptions('createLimiter', options, known, '{ store: memoryStore() }');
  if (options.clock !== undefined && typeof options.clock !== 'function') {
    throw new InvalidOptionError(`createLimiter: clock must be a function returning epoch ms, got ${describeValue(options.clock)}`);
  }
  const store = options.store === undefined ? memoryStore() : options.store;
  if (typeof store !== 'object' || store === null || typeof store.consume !== 'function') {
    throw new InvalidOptionError(`createLimiter: store must be a Store such as memoryStore() or redisStore(...), got ${describeValue(store)}`);
  }
  const breaker = options.breaker ?? {};
  if (breaker !== false && (typeof breaker !== 'object' || breaker === null)) {
    throw new InvalidOptionError(`createLimiter: breaker must be an object of breaker settings or false, got ${describeValue(breaker)}`);
  }
  const storeDeadline = (store as Store).deadlineMs;
  return {
    store,
    clock: options.clock,
    failureMode: options.failureMode === undefined ? 'local' : checkFailureMode(options.failureMode, 'createLimiter: failureMode'),
    expectedNodes: options.expectedNodes === undefined ? 1 : checkExpectedNodes(options.expectedNodes, 'createLimiter: expectedNodes'),
    heartbeatMs: options.heartbeatMs === false ? false : checkWholeNumber(options.heartbeatMs, { name: 'createLimiter: heartbeatMs', min: 10, max: 60_000, unit: 'ms', meaning: 'or false: no heartbeat', fallback: DEFAULT_HEARTBEAT_MS }),
    deadlineMs: checkDeadline(options.deadlineMs ?? storeDeadline ?? DEFAULT_DEADLINE_MS, options.deadlineMs === undefined && storeDeadline !== undefined ? "the store's deadlineMs" : 'createLimiter: deadlineMs'),
    breaker,
    maxInFlight: checkWholeNumber(options.maxInFlight, { name: 'createLimiter: maxInFlight', min: 1, fallback: 10_000 }),
    overLimitCache: overLimitCacheSettings(options.overLimitCache),
  };
}

function overLimitCacheSettings(value: unknown): OverLimitCacheOptions | false {
  if (value === undefined || value === false) return false;
  if (value === true) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionError(`createLimiter: overLimitCache must be true, false or { maxKeys }, got ${describeValue(value)}`);
  }
  checkOptions('overLimitCache', value, ['maxKeys'], '{ maxKeys: 100000 }');
  return value as OverLimitCacheOptions;
}
