/**
 * The client: `fetch`, with the call signature of `fetch`, that backs off when a rate-limited API
 * says so. It retries the configured statuses (429, 503) with exponential backoff and full jitter,
 * never sooner than the server's `Retry-After`, within a per-call attempt limit, a per-call wait
 * cap and a retry budget shared by all calls; optionally it paces requests per origin so they
 * rarely meet a 429 at all. Aborting the call's signal stops any wait at once.
 */
import { readRateLimit, type RateLimitInfo } from './headers.js';
import { resolveClientOptions, type ClientOptions, type FetchFunction, type ResolvedClientOptions } from './options.js';
import { Pacer } from './pacer.js';
import { requestFacts } from './request.js';
import { RetryBudget, fullJitterDelay } from './retry-budget.js';
import { abortableSleep } from './sleep.js';

/** A client made by {@link createClient}. */
export interface TollgateClient {
  /** `fetch` with backoff, retries and pacing; resolves to the last response when it gives up. */
  readonly fetch: FetchFunction;
  /** Retries the shared budget would allow now. */
  readonly retryBudget: number;
  /** Origins the pacer remembers now (0 without pacing). */
  readonly pacedHosts: number;
}

/**
 * Makes a client. Options are checked at once: a misspelt or out-of-range option throws an
 * `InvalidOptionError` (`ERR_TOLLGATE_INVALID_OPTION`) naming it.
 */
export function createClient(options: ClientOptions = {}): TollgateClient {
  return new RateLimitedClient(resolveClientOptions(options));
}

/** The client's `fetch` alone: `const fetch = rateLimitedFetch({ pacing: true })`. */
export function rateLimitedFetch(options: ClientOptions = {}): FetchFunction {
  return createClient(options).fetch;
}

/** What one call has spent so far. */
interface CallState {
  waitedMs: number;
}

class RateLimitedClient implements TollgateClient {
  private readonly budget: RetryBudget;
  private readonly pacer: Pacer | undefined;
  private readonly sleep: (ms: number, signal: AbortSignal | undefined) => Promise<void>;

  constructor(private readonly options: ResolvedClientOptions) {
    this.budget = new RetryBudget(options.budgetRatio, options.budgetMaxTokens);
    this.pacer = options.pacing === undefined ? undefined : new Pacer(options.pacing.maxHosts, options.pacing.windowMs);
    this.sleep = options.sleep ?? abortableSleep;
  }

  readonly fetch: FetchFunction = (input, init) => this.send(input, init);

  get retryBudget(): number {
    return this.budget.tokens;
  }

  get pacedHosts(): number {
    return this.pacer?.size ?? 0;
  }

  private async send(input: string | URL | Request, init: RequestInit | undefined): Promise<Response> {
    const signal = init?.signal ?? (input instanceof Request ? input.signal : undefined);
    signal?.throwIfAborted();
    const facts = requestFacts(input, init);
    const mayRetry = facts.replayable && this.options.retryMethods.has(facts.method);
    this.budget.deposit();
    const call: CallState = { waitedMs: 0 };
    for (let attempt = 0; ; attempt++) {
      await this.pace(facts.origin, call, signal);
      const response = await (this.options.fetch ?? globalThis.fetch)(input, init);
      const now = this.options.now();
      const info = readRateLimit(response.headers, now);
      if (facts.origin !== undefined) this.pacer?.learn(facts.origin, info, now);
      const delayMs = mayRetry ? this.retryDelay(response.status, info, attempt, call) : undefined;
      if (delayMs === undefined) return response;
      try {
        this.options.onRetry?.({ attempt: attempt + 1, delayMs, response, rateLimit: info });
      } finally {
        // The body is not wanted: release the connection rather than wait for the garbage collector.
        await response.body?.cancel().catch(() => undefined);
      }
      await this.wait(delayMs, call, signal);
    }
  }

  /**
   * How long to wait before retrying `attempt` (0-based), or undefined to give up and return the
   * response: a status not retried, the attempts or the wait cap spent, or the budget empty.
   */
  private retryDelay(status: number, info: RateLimitInfo, attempt: number, call: CallState): number | undefined {
    const { options } = this;
    if (!options.retryStatuses.has(status) || attempt + 1 >= options.maxAttempts) return undefined;
    // Never sooner than the server asked; without Retry-After, an exhausted quota's reset is the ask.
    const serverWait = info.retryAfterMs ?? (info.remaining === 0 ? info.resetMs : undefined) ?? 0;
    const delay = Math.max(serverWait, fullJitterDelay(attempt, options.backoffBaseMs, options.backoffCapMs, options.random));
    if (call.waitedMs + delay > options.maxDelayMs) return undefined;
    return this.budget.withdraw() ? delay : undefined;
  }

  /** Waits the pacer's turn for `origin`, unless that would pass the call's wait cap (then it goes now). */
  private async pace(origin: string | undefined, call: CallState, signal: AbortSignal | undefined): Promise<void> {
    if (this.pacer === undefined || origin === undefined) return;
    const waitMs = this.pacer.reserve(origin, this.options.now());
    if (waitMs <= 0 || call.waitedMs + waitMs > this.options.maxDelayMs) return;
    try {
      await this.wait(waitMs, call, signal);
    } catch (error) {
      this.pacer.release(origin);
      throw error;
    }
  }

  private async wait(ms: number, call: CallState, signal: AbortSignal | undefined): Promise<void> {
    await this.sleep(ms, signal);
    call.waitedMs += ms;
    // An injected sleep may not watch the signal: nothing is sent after an abort either way.
    signal?.throwIfAborted();
  }
}
