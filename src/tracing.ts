/**
 * OpenTelemetry spans around decisions and store calls, through `@opentelemetry/api` only: off
 * (no span, no attribute object, no closure) until the application registers an SDK's
 * TracerProvider, then on without any option. Which spans there are and what their attributes mean
 * is in docs/operations.md ("Tracing"); caller identities (keys, IPs) are never recorded.
 *
 * Whether an SDK is there is looked up at most once per synchronous run of decisions and every
 * {@link USES_PER_LOOKUP} uses (as clock.ts reads the clock), so the hot path pays one counter
 * decrement, and an SDK registered at any time is seen from the next turn of the event loop.
 */
import { readFileSync } from 'node:fs';
import { ProxyTracerProvider, SpanKind, SpanStatusCode, context, trace, type Attributes, type Span, type Tracer, type TracerProvider } from '@opentelemetry/api';

/** The instrumentation scope's name: what `trace.getTracer` is asked for. */
export const TRACER_NAME = 'tollgate';

/** Span names. */
export const SPAN = {
  /** One decision: `limit`, `limitSync`, `peek`, `look`, `decide`. */
  decide: 'tollgate.decide',
  /** Several limits decided together: `limitAll`, `decideAll`. */
  decideAll: 'tollgate.decide_all',
  /** A rules check (`check`, `decideCheck`: envoy's ShouldRateLimit). */
  check: 'tollgate.check',
  /** One call to a store that can fail (Redis), under its deadline and breaker. */
  store: 'tollgate.store',
} as const;

/** Attribute names, all under `tollgate.` but `error.type` (OpenTelemetry's own). */
export const ATTR = {
  operation: 'tollgate.operation',
  storeKind: 'tollgate.store.kind',
  algorithm: 'tollgate.policy.algorithm',
  limit: 'tollgate.policy.limit',
  windowMs: 'tollgate.policy.window_ms',
  cost: 'tollgate.cost',
  result: 'tollgate.decision.result',
  remaining: 'tollgate.decision.remaining',
  retryAfterMs: 'tollgate.decision.retry_after_ms',
  reason: 'tollgate.decision.reason',
  limitsCount: 'tollgate.limits.count',
  limitsAlgorithm: 'tollgate.limits.algorithm',
  limitsLimit: 'tollgate.limits.limit',
  limitsWindowMs: 'tollgate.limits.window_ms',
  limitsCost: 'tollgate.limits.cost',
  limitsResult: 'tollgate.limits.result',
  limitsRemaining: 'tollgate.limits.remaining',
  limitsReason: 'tollgate.limits.reason',
  domain: 'tollgate.rule.domain',
  descriptors: 'tollgate.check.descriptors',
  rules: 'tollgate.check.rules',
  codes: 'tollgate.check.codes',
  checkRemaining: 'tollgate.check.remaining',
  shadowMode: 'tollgate.shadow_mode',
  shadowOverLimit: 'tollgate.check.shadow_over_limit',
  storeOperation: 'tollgate.store.operation',
  deadlineMs: 'tollgate.store.deadline_ms',
  inFlight: 'tollgate.store.in_flight',
  batchSize: 'tollgate.batch.size',
  fallback: 'tollgate.store.fallback',
  errorType: 'error.type',
} as const;

/** `tollgate.decision.result`: what a decision or a check answered. */
export type TracedResult = 'allowed' | 'over_limit';

const USES_PER_LOOKUP = 256;
/** What the API answers with no SDK registered: its own no-op provider. */
const NO_SDK: TracerProvider = new ProxyTracerProvider().getDelegate();

let tracer: Tracer | undefined;
let tracerFrom: TracerProvider | undefined;
let usesLeft = 0;

function expire(): void {
  usesLeft = 0;
}

/** Settled once: `.then(expire)` is the cheapest microtask (see clock.ts). */
const SETTLED = Promise.resolve();

/**
 * The tracer to start spans with while an SDK is registered, else undefined: a caller that gets
 * undefined does no tracing work at all.
 */
export function activeTracer(): Tracer | undefined {
  if (usesLeft === 0) {
    lookUp();
    void SETTLED.then(expire);
    usesLeft = USES_PER_LOOKUP;
  }
  usesLeft -= 1;
  return tracer;
}

function lookUp(): void {
  const global = trace.getTracerProvider();
  // Another copy of the API registered the SDK: its own proxy, taken as it is (it works, maybe as a no-op).
  const provider = global instanceof ProxyTracerProvider ? global.getDelegate() : global;
  if (provider === NO_SDK) {
    tracer = tracerFrom = undefined;
  } else if (provider !== tracerFrom) {
    tracerFrom = provider;
    tracer = provider.getTracer(TRACER_NAME, version());
  }
}

let packageVersion: string | undefined;

/** Tollgate's version, read once the first SDK is seen (never when tracing stays off). */
function version(): string | undefined {
  if (packageVersion === undefined) {
    try {
      packageVersion = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string }).version ?? '';
    } catch {
      packageVersion = '';
    }
  }
  return packageVersion === '' ? undefined : packageVersion;
}

/** Starts an internal span named `name` under the active span, with the attributes known so far. */
export function startSpan(active: Tracer, name: string, attributes: Attributes): Span {
  return active.startSpan(name, { kind: SpanKind.INTERNAL, attributes });
}

/**
 * Runs `run` as `span`'s work and ends the span when the result settles: `describe` adds the
 * result's attributes, a throw or a rejection is recorded as the span's error and passed on. A
 * synchronous result stays synchronous. With `parent` (the default) the span is the active one
 * while `run` runs, so spans started inside are its children; work that starts no span (a
 * memory-store decision) passes false and skips the context switch.
 */
export function inSpan<T>(span: Span, run: () => T | Promise<T>, describe: (span: Span, value: T) => void, parent = true): T | Promise<T> {
  let result: T | Promise<T>;
  try {
    result = parent ? context.with(trace.setSpan(context.active(), span), run) : run();
  } catch (error) {
    endFailed(span, error);
    throw error;
  }
  if (!(result instanceof Promise)) return ended(span, result, describe);
  return result.then(
    (value) => ended(span, value, describe),
    (error: unknown) => {
      endFailed(span, error);
      throw error;
    },
  );
}

function ended<T>(span: Span, value: T, describe: (span: Span, value: T) => void): T {
  try {
    if (span.isRecording()) describe(span, value);
  } catch {
    // Describing a result for a trace must never fail the decision.
  }
  span.end();
  return value;
}

function endFailed(span: Span, error: unknown): void {
  recordFailure(span, error);
  span.end();
}

const failedSpans = new WeakSet<Span>();

/**
 * Marks `span` failed: the exception recorded, status ERROR, and `error.type` (the error's
 * `ERR_TOLLGATE_*` code or class name, or `type` when given).
 */
export function recordFailure(span: Span, error: unknown, type?: string): void {
  // The first failure is the cause (a store timeout); a fallback that then throws does not add a second.
  if (failedSpans.has(span)) return;
  failedSpans.add(span);
  const exception = error instanceof Error ? error : new Error(String(error));
  span.recordException(exception);
  span.setAttribute(ATTR.errorType, type ?? (exception as { code?: unknown }).code?.toString() ?? exception.name);
  span.setStatus({ code: SpanStatusCode.ERROR, message: exception.message });
}
