/**
 * The middleware's `settle` hook (docs/http.md "Cost known after the response"): a request's cost
 * is reserved at its estimate (the `cost` option) when it comes in, and settled with what
 * `settle(req, res)` says it actually took once its response is done — the tokens an LLM reported
 * in a response header, the rows returned. Reserve then settle through the middleware's limiter:
 * the same engine, failure modes and store as every other decision.
 */
import { randomUUID } from 'node:crypto';
import type { Decision } from '../decision.js';
import { InvalidCostError, InvalidOptionError, describeValue } from '../errors.js';
import { checkReservable, type FailureMode } from '../limiter/index.js';
import type { CompiledPolicy } from '../policy.js';
import type { Limiter } from '../rules/create-limiter.js';
import type { MaybePromise } from '../store/types.js';

/**
 * What a request actually cost, read once its response is done (a whole number ≥ 0). `Res` is the
 * framework's response (node's `ServerResponse`); `never` by default, so a hook typed for any response fits.
 */
export type SettleHook<Req, Res = never> = (req: Req, res: Res) => MaybePromise<number>;

/** A response that says when it is done: node's `ServerResponse` ('close' comes after 'finish', and when the client leaves). */
export interface ClosingResponse {
  once(event: 'close', listener: () => void): unknown;
}

interface Booked {
  readonly key: string;
  readonly policy: CompiledPolicy;
  readonly id: string;
}

/** Checks the `settle` option against the middleware's other options; undefined when it is not given. */
export function checkSettleHook<Req>(hook: unknown, mode: 'policy' | 'limits' | 'rules' | 'concurrency', shaping: unknown, policy: CompiledPolicy | undefined): SettleHook<Req> | undefined {
  if (hook === undefined) return undefined;
  if (typeof hook !== 'function') throw new InvalidOptionError(`settle must be a function (req, res) => actual cost, got ${describeValue(hook)}`);
  if (mode !== 'policy' || shaping !== undefined || policy === undefined) {
    throw new InvalidOptionError('settle works with one policy (reserve its estimate, settle the actual): not with limits, rules or shaping');
  }
  checkReservable(policy, 'settle');
  return hook as SettleHook<Req>;
}

/** Reserves each admitted request's estimate and settles it when its response is done. */
export class ResponseSettler<Req> {
  /** The reservation of each admitted request (a framework's request object) still waiting for its response to be done. */
  private readonly booked = new WeakMap<object, Booked>();

  constructor(
    private readonly limiter: Limiter,
    private readonly hook: SettleHook<Req>,
    private readonly tell: (error: unknown, req: Req) => void,
  ) {}

  /** Reserves `cost` (≥ 1) for `req` under a fresh id; an admitted reservation waits for {@link settleAfter}. */
  reserve(req: Req, key: string, policy: CompiledPolicy, cost: number, failureMode: FailureMode | undefined): Promise<Decision> {
    const id = randomUUID();
    return this.limiter.reserve(key, policy, { cost, id, ...(failureMode === undefined ? {} : { failureMode }) }).then((decision) => {
      // A failure mode's answer booked nothing in the store: there is nothing to settle.
      if (decision.allowed && decision.reason === undefined) this.booked.set(req as object, { key, policy, id });
      return decision;
    });
  }

  /**
   * Settles `req`'s reservation, if it has one, once `done` says the response is done (node's
   * response: 'close', after 'finish' or when the client leaves). `response` is what the hook is
   * given, read then (by default `done` itself: node's response).
   */
  settleAfter(req: Req, done: ClosingResponse, response: () => unknown = () => done): void {
    const booked = this.booked.get(req as object);
    if (booked === undefined) return;
    this.booked.delete(req as object);
    done.once('close', () => void this.settle(req, response(), booked));
  }

  /** Asks the hook, then settles; a hook that fails or answers no cost leaves the estimate standing (and says so). */
  private async settle(req: Req, res: unknown, booked: Booked): Promise<void> {
    try {
      const cost = await this.hook(req, res as never);
      if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0) {
        throw new InvalidCostError(`settle(req, res) must answer what the request cost, a whole number ≥ 0, got ${describeValue(cost)}; the estimate stands`);
      }
      await this.limiter.settle(booked.key, booked.policy, { id: booked.id, cost });
    } catch (error) {
      this.tell(error, req);
    }
  }
}
