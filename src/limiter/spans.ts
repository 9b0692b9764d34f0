/**
 * The engine's spans: `tollgate.decide` around one decision and `tollgate.decide_all` around
 * limits decided together, with the policy and the decision as attributes (never the key: it names
 * the caller). Only reached while an SDK is registered (tracing.ts); store calls get their own
 * span in store-guard.ts.
 */
import type { Decision } from '../decision.js';
import type { DecideMode, LimitRequest } from './checks.js';
import type { CompiledPolicy, Policy } from '../policy.js';
import type { MaybePromise } from '../store/types.js';
import { ATTR, SPAN, inSpan, startSpan, type TracedResult } from '../tracing.js';
import type { Span, Tracer } from '@opentelemetry/api';

/** `tollgate.decision.result` of one decision. */
export function resultOf(allowed: boolean): TracedResult {
  return allowed ? 'allowed' : 'over_limit';
}

/** How the engine calls a store, for its decisions' spans. */
export interface TracedStore {
  /** `tollgate.store.kind`. */
  readonly kind: string;
  /** Whether its calls are spans of their own (guarded stores): then the decision's span is their parent. */
  readonly spans: boolean;
}

/**
 * Runs `decide` (one decision on `store`) in a `tollgate.decide` span. `policyOf` gives the
 * compiled policy once the decision is made (its input was valid then); `cost` is the call's.
 */
export function tracedDecide(tracer: Tracer, store: TracedStore, mode: DecideMode, decide: () => MaybePromise<Decision>, policyOf: () => CompiledPolicy, cost: number | undefined): MaybePromise<Decision> {
  const span = startSpan(tracer, SPAN.decide, { [ATTR.operation]: mode, [ATTR.storeKind]: store.kind });
  return inSpan(span, decide, (traced, decision) => describeDecision(traced, policyOf(), cost ?? 1, decision), store.spans);
}

function describeDecision(span: Span, policy: CompiledPolicy, cost: number, decision: Decision): void {
  span.setAttributes({
    [ATTR.algorithm]: policy.algorithm,
    [ATTR.limit]: policy.limit,
    [ATTR.windowMs]: policy.windowMs,
    [ATTR.cost]: cost,
    [ATTR.result]: resultOf(decision.allowed),
    [ATTR.remaining]: decision.remaining,
  });
  if (!decision.allowed) span.setAttribute(ATTR.retryAfterMs, decision.retryAfter);
  if (decision.reason !== undefined) span.setAttribute(ATTR.reason, decision.reason);
}

/**
 * Runs `decideAll` (`requests` on `store`) in a `tollgate.decide_all` span: per limit, in call
 * order, arrays of the policy (`compile` gives it once the limits are decided, their input valid)
 * and the decision; overall, the result (over the limit when any limit denied) and the first
 * degraded or special `reason`.
 */
export function tracedDecideAll(tracer: Tracer, store: TracedStore, mode: DecideMode, requests: readonly LimitRequest[], decideAll: () => MaybePromise<Decision[]>, compile: (policy: Policy | CompiledPolicy) => CompiledPolicy): MaybePromise<Decision[]> {
  const count = Array.isArray(requests) ? requests.length : 0;
  const span = startSpan(tracer, SPAN.decideAll, { [ATTR.operation]: mode, [ATTR.storeKind]: store.kind, [ATTR.limitsCount]: count });
  return inSpan(span, decideAll, (traced, decisions) => {
    const limits = requests.map((request) => ({ policy: compile(request.policy), cost: request.cost ?? 1 }));
    traced.setAttributes({
      [ATTR.limitsAlgorithm]: limits.map((limit) => limit.policy.algorithm),
      [ATTR.limitsLimit]: limits.map((limit) => limit.policy.limit),
      [ATTR.limitsWindowMs]: limits.map((limit) => limit.policy.windowMs),
      [ATTR.limitsCost]: limits.map((limit) => limit.cost),
      [ATTR.limitsResult]: decisions.map((decision) => resultOf(decision.allowed)),
      [ATTR.limitsRemaining]: decisions.map((decision) => decision.remaining),
      [ATTR.limitsReason]: decisions.map((decision) => decision.reason ?? ''),
      [ATTR.result]: resultOf(decisions.every((decision) => decision.allowed)),
    });
    const reason = decisions.find((decision) => decision.reason !== undefined)?.reason;
    if (reason !== undefined) traced.setAttribute(ATTR.reason, reason);
  }, store.spans);
}
