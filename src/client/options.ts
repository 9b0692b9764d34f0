/**
 * The client's options: their defaults, and the one check that refuses a misspelt or out-of-range
 * option at construction with a message naming it and what is allowed.
 */
import { InvalidOptionError, describeValue } from '../errors.js';
import { checkOptions, checkWholeNumber, optionalFunction } from '../options.js';
import type { RateLimitInfo } from './headers.js';

/** The `fetch` the client wraps: the global one, or any function with its signature. */
export type FetchFunction = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** What {@link ClientOptions.onRetry} is told before each wait. */
export interface RetryEvent {
  /** The retry about to be made: 1 for the first retry (the second attempt). */
  readonly attempt: number;
  /** How long the client waits before it (ms). */
  readonly delayMs: number;
  /** The response that is being retried (its body is discarded after the hook returns). */
  readonly response: Response;
  /** What its headers said. */
  readonly rateLimit: RateLimitInfo;
}

/** Client-side pacing: wait locally rather than meet a 429. */
export interface PacingOptions {
  /** Origins remembered at most (least recently used forgotten first). Default 1,000. */
  readonly maxHosts?: number;
  /** The window to assume when a server sends a limit but no window (`X-RateLimit-*` only), ms. */
  readonly windowMs?: number;
}

/** The retry budget shared by every call of one client. */
export interface RetryBudgetOptions {
  /** Share of a retry each call earns (0.1: retries add at most 10% to traffic). Default 0.1. */
  readonly ratio?: number;
  /** Retries the budget holds at most, and starts with. Default 10. */
  readonly maxTokens?: number;
}

/** Options of {@link createClient}. Every duration is milliseconds. */
export interface ClientOptions {
  /** The fetch to wrap. Default: the global `fetch`, looked up on each call. */
  readonly fetch?: FetchFunction;
  /** Attempts per call, the first included (1: never retry). Default 3. */
  readonly maxAttempts?: number;
  /** Statuses that are retried. Default [429, 503]. */
  readonly retryStatuses?: readonly number[];
  /** Methods that are retried (safe to replay). Default GET, HEAD, OPTIONS, PUT, DELETE, TRACE. */
  readonly retryMethods?: readonly string[];
  /** First backoff ceiling: the nth retry waits up to min(backoffCapMs, backoffBaseMs × 2^(n−1)). Default 100. */
  readonly backoffBaseMs?: number;
  /** Backoff ceiling for any one retry. Default 10,000. */
  readonly backoffCapMs?: number;
  /** Longest a call waits in all (pacing and backoff); a longer wait returns the response at once. Default 30,000. */
  readonly maxDelayMs?: number;
  readonly retryBudget?: RetryBudgetOptions;
  /** Client-side pacing per origin: `true` for the defaults. Default off. */
  readonly pacing?: boolean | PacingOptions;
  /** Called before each retry's wait (logging, metrics). */
  readonly onRetry?: (event: RetryEvent) => void;
  /** The clock, epoch ms. Default `Date.now`. */
  readonly now?: () => number;
  /** Waits `ms`, rejecting with `signal.reason` at once if it aborts. Default: a timer. */
  readonly sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
  /** A number in [0, 1) for the jitter. Default `Math.random`. */
  readonly random?: () => number;
}

/** The options with every default filled in. */
export interface ResolvedClientOptions {
  readonly fetch: FetchFunction | undefined;
  readonly maxAttempts: number;
  readonly retryStatuses: ReadonlySet<number>;
  readonly retryMethods: ReadonlySet<string>;
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
  readonly maxDelayMs: number;
  readonly budgetRatio: number;
  readonly budgetMaxTokens: number;
  readonly pacing: { readonly maxHosts: number; readonly windowMs: number | undefined } | undefined;
  readonly onRetry: ((event: RetryEvent) => void) | undefined;
  readonly now: () => number;
  readonly sleep: ((ms: number, signal: AbortSignal | undefined) => Promise<void>) | undefined;
  readonly random: () => number;
}

/** The defaults of {@link ClientOptions}, as documented in docs/client.md. */
export const CLIENT_DEFAULTS = {
  maxAttempts: 3,
  retryStatuses: [429, 503],
  retryMethods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'],
  backoffBaseMs: 100,
  backoffCapMs: 10_000,
  maxDelayMs: 30_000,
  retryBudget: { ratio: 0.1, maxTokens: 10 },
  pacing: { maxHosts: 1000 },
} as const;

const OPTION_NAMES = [
  'fetch', 'maxAttempts', 'retryStatuses', 'retryMethods', 'backoffBaseMs', 'backoffCapMs', 'maxDelayMs',
  'retryBudget', 'pacing', 'onRetry', 'now', 'sleep', 'random',
] as const;
const WHERE = 'createClient';

/** Checks `options` and fills in the defaults; throws {@link InvalidOptionError} naming the option at fault. */
export function resolveClientOptions(options: unknown = {}): ResolvedClientOptions {
  checkOptions(WHERE, options, OPTION_NAMES, '{ maxAttempts: 3, pacing: true }');
  const given = options as ClientOptions;
  const budget = given.retryBudget ?? {};
  checkOptions(`${WHERE} retryBudget`, budget, ['ratio', 'maxTokens'], '{ ratio: 0.1, maxTokens: 10 }');
  const backoffBaseMs = integerIn('backoffBaseMs', given.backoffBaseMs ?? CLIENT_DEFAULTS.backoffBaseMs, 1, 3_600_000);
  return {
    fetch: optionalFunction(given.fetch, `${WHERE}: fetch`),
    maxAttempts: integerIn('maxAttempts', given.maxAttempts ?? CLIENT_DEFAULTS.maxAttempts, 1, 100),
    retryStatuses: new Set(listOf('retryStatuses', given.retryStatuses ?? CLIENT_DEFAULTS.retryStatuses, isStatus, 'HTTP statuses from 100 to 599')),
    retryMethods: new Set(listOf('retryMethods', given.retryMethods ?? CLIENT_DEFAULTS.retryMethods, isMethod, 'method names like "GET"').map((m) => m.toUpperCase())),
    backoffBaseMs,
    backoffCapMs: integerIn('backoffCapMs', given.backoffCapMs ?? CLIENT_DEFAULTS.backoffCapMs, backoffBaseMs, 86_400_000),
    maxDelayMs: integerIn('maxDelayMs', given.maxDelayMs ?? CLIENT_DEFAULTS.maxDelayMs, 0, 86_400_000),
    budgetRatio: numberIn('retryBudget.ratio', budget.ratio ?? CLIENT_DEFAULTS.retryBudget.ratio, 0, 1000),
    budgetMaxTokens: integerIn('retryBudget.maxTokens', budget.maxTokens ?? CLIENT_DEFAULTS.retryBudget.maxTokens, 0, 1_000_000),
    pacing: resolvePacing(given.pacing),
    onRetry: optionalFunction(given.onRetry, `${WHERE}: onRetry`),
    now: optionalFunction(given.now, `${WHERE}: now`) ?? Date.now,
    sleep: optionalFunction(given.sleep, `${WHERE}: sleep`),
    random: optionalFunction(given.random, `${WHERE}: random`) ?? Math.random,
  };
}

function resolvePacing(pacing: unknown): ResolvedClientOptions['pacing'] {
  if (pacing === undefined || pacing === false) return undefined;
  if (pacing === true) return { maxHosts: CLIENT_DEFAULTS.pacing.maxHosts, windowMs: undefined };
  checkOptions(`${WHERE} pacing`, pacing, ['maxHosts', 'windowMs'], 'true or { maxHosts: 1000, windowMs: 60000 }');
  const { maxHosts, windowMs } = pacing as PacingOptions;
  return {
    maxHosts: integerIn('pacing.maxHosts', maxHosts ?? CLIENT_DEFAULTS.pacing.maxHosts, 1, 1_000_000),
    windowMs: windowMs === undefined ? undefined : integerIn('pacing.windowMs', windowMs, 1, 86_400_000 * 366),
  };
}

function integerIn(name: string, value: unknown, min: number, max: number): number {
  return checkWholeNumber(value, { name: `${WHERE}: ${name}`, min, max });
}

function numberIn(name: string, value: unknown, min: number, max: number): number {
  if (typeof value === 'number' && Number.isFinite(value) && value >= min && value <= max) return value;
  throw new InvalidOptionError(`${WHERE}: ${name} must be a number from ${min} to ${max}, got ${describeValue(value)}`);
}

function listOf<T>(name: string, value: unknown, valid: (item: unknown) => item is T, what: string): T[] {
  if (!Array.isArray(value)) throw new InvalidOptionError(`${WHERE}: ${name} must be an array of ${what}, got ${describeValue(value)}`);
  const bad = value.findIndex((item) => !valid(item));
  if (bad !== -1) throw new InvalidOptionError(`${WHERE}: ${name} must hold ${what}, got ${describeValue(value[bad])} at [${bad}]`);
  return value as T[];
}

function isStatus(item: unknown): item is number {
  return typeof item === 'number' && Number.isInteger(item) && item >= 100 && item <= 599;
}

function isMethod(item: unknown): item is string {
  return typeof item === 'string' && /^[A-Za-z]{1,20}$/.test(item);
}
