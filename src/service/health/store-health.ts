/**
 * The store's health as the service shows it: one log line when the store is lost and one when it
 * is back (not one per failed call, nor per probe of a store still down), and the Prometheus series
 * of the breaker, the fallbacks and the degraded checks.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { BreakerState, BreakerTransition, LimiterCore } from '../../limiter/index.js';
import type { CheckEvent, ServiceContext } from '../context.js';
import type { ReadinessCheck } from './readiness.js';

const STATES: readonly BreakerState[] = ['closed', 'half-open', 'open'];

/**
 * Readiness follows the breaker: not ready while it is open (the store is failing and checks are
 * answered by the failure modes), ready again once probes succeed. Each transition is announced
 * (`onChange`), so gRPC health watchers hear it at once.
 */
export function breakerCheck(limiter: LimiterCore, onChange: () => void): ReadinessCheck {
  limiter.onTransition(onChange);
  return {
    name: 'breaker',
    check: () => {
      const { breaker } = limiter.health();
      return { ready: breaker !== 'open', details: { breaker } };
    },
  };
}

/** Logs "store lost" once when the breaker opens, "store back" once when it closes; returns the unsubscribe. */
export function logStoreHealth(ctx: ServiceContext, logger: Logger = ctx.logger): () => void {
  let lostAt: number | undefined;
  const mode = ctx.options.failureMode;
  return ctx.limiter.onTransition((transition: BreakerTransition) => {
    if (transition.to === 'open' && lostAt === undefined) {
      lostAt = transition.at;
      logger.warn({ store: ctx.store.name, cause: transition.cause, failureMode: mode }, `store lost: checks are decided by the failure modes (default ${mode}) until it answers`);
    } else if (transition.to === 'closed' && lostAt !== undefined) {
      logger.info({ store: ctx.store.name, outageMs: transition.at - lostAt }, 'store back: shared counters decide again');
      lostAt = undefined;
    } else {
      logger.debug({ from: transition.from, to: transition.to, cause: transition.cause }, 'store breaker transition');
    }
  });
}

/** The breaker, fallback and degraded-check series; returns the unsubscribe. */
export function defineStoreHealthMetrics(ctx: ServiceContext, registers: Registry[]): () => void {
  new Gauge({
    name: 'tollgate_store_breaker_state',
    help: 'The circuit breaker around the store: 1 for the current state (closed: the store decides; open: the failure modes decide; half-open: probing).',
    labelNames: ['state'] as const,
    registers,
    collect() {
      const current = ctx.limiter.health().breaker;
      for (const state of STATES) this.set({ state }, state === current ? 1 : 0);
    },
  });
  new Gauge({
    name: 'tollgate_store_seconds_since_healthy',
    help: 'Seconds since the store last answered a decision (-1: not yet).',
    registers,
    collect() {
      const last = ctx.limiter.health().lastHealthyAt;
      this.set(last === undefined ? -1 : Math.max(0, (Date.now() - last) / 1_000));
    },
  });
  new Gauge({
    name: 'tollgate_store_calls_in_flight',
    help: 'Store calls out now.',
    registers,
    collect() {
      this.set(ctx.limiter.health().inFlight);
    },
  });
  defineFallbackCounter(ctx, registers);
  defineOverLimitCacheMetrics(ctx, registers);
  defineLocalFirstMetrics(ctx, registers);
  return countTransitionsAndDegradedChecks(ctx, registers);
}

/** The local over-limit cache: decisions it answered (envoy's name for them) and keys it holds. */
function defineOverLimitCacheMetrics(ctx: ServiceContext, registers: Registry[]): void {
  if (ctx.limiter.overLimitCacheStats() === undefined) return;
  let seen = 0;
  new Counter({
    name: 'tollgate_over_limit_with_local_cache_total',
    help: 'Decisions answered by the local over-limit cache (a key denied until its retry time), without a store call.',
    registers,
    collect() {
      const hits = ctx.limiter.overLimitCacheStats()?.hits ?? 0;
      this.inc(Math.max(0, hits - seen));
      seen = Math.max(seen, hits);
    },
  });
  new Gauge({
    name: 'tollgate_over_limit_cache_keys',
    help: 'Keys held by the local over-limit cache.',
    registers,
    collect() {
      this.set(ctx.limiter.overLimitCacheStats()?.keys ?? 0);
    },
  });
}

/** Local-first (rules with `sync_interval_ms`): decisions made on a node's view, syncs, views held. */
function defineLocalFirstMetrics(ctx: ServiceContext, registers: Registry[]): void {
  const seen = { local: 0, ok: 0, failed: 0 };
  /** How much a total the limiter keeps grew since the last scrape. */
  const growth = (name: keyof typeof seen, total: number): number => {
    const step = Math.max(0, total - seen[name]);
    seen[name] = Math.max(seen[name], total);
    return step;
  };
  new Counter({
    name: 'tollgate_local_first_decisions_total',
    help: 'Decisions made by local-first on this node’s view of a counter, without a store call.',
    registers,
    collect() {
      this.inc(growth('local', ctx.limiter.localFirstStats()?.local ?? 0));
    },
  });
  new Counter({
    name: 'tollgate_local_first_syncs_total',
    help: 'Local-first syncs with the store (push the units admitted here, pull the shared count), by result (ok, failed).',
    labelNames: ['result'] as const,
    registers,
    collect() {
      const stats = ctx.limiter.localFirstStats();
      this.inc({ result: 'failed' }, growth('failed', stats?.syncFailures ?? 0));
      // Answered only: a sync still out at this scrape may yet fail.
      this.inc({ result: 'ok' }, growth('ok', stats === undefined ? 0 : stats.syncs - stats.syncFailures - stats.syncsOut));
    },
  });
  new Gauge({
    name: 'tollgate_local_first_views',
    help: 'Keys this node holds a local-first view of.',
    registers,
    collect() {
      this.set(ctx.limiter.localFirstStats()?.views ?? 0);
    },
  });
}

/** Fallbacks by cause, followed from the limiter's totals at scrape time. */
function defineFallbackCounter(ctx: ServiceContext, registers: Registry[]): void {
  const seen: Record<string, number> = {};
  new Counter({
    name: 'tollgate_store_fallbacks_total',
    help: 'Decisions answered by a failure mode instead of the store, by cause (timeout: past the deadline; error: the store failed; breaker-open: not asked; overload: too many calls in flight).',
    labelNames: ['cause'] as const,
    registers,
    collect() {
      for (const [cause, total] of Object.entries(ctx.limiter.health().fallbacks)) {
        this.inc({ cause }, Math.max(0, total - (seen[cause] ?? 0)));
        seen[cause] = Math.max(total, seen[cause] ?? 0);
      }
    },
  });
}

/** Breaker transitions and degraded checks, counted as they happen; returns the unsubscribe. */
function countTransitionsAndDegradedChecks(ctx: ServiceContext, registers: Registry[]): () => void {
  const transitions = new Counter({
    name: 'tollgate_store_breaker_transitions_total',
    help: 'Changes of the store breaker, by the state entered.',
    labelNames: ['to'] as const,
    registers,
  });
  const degraded = new Counter({
    name: 'tollgate_degraded_checks_total',
    help: 'Checks answered by a failure mode (fail-open, fail-closed, local-fallback), by transport.',
    labelNames: ['reason', 'transport'] as const,
    registers,
  });
  const stopTransitions = ctx.limiter.onTransition((transition) => transitions.inc({ to: transition.to }));
  const onCheck = (event: CheckEvent): void => {
    if (event.result.degraded !== undefined) degraded.inc({ reason: event.result.degraded, transport: event.via });
  };
  ctx.events.on('check', onCheck);
  return () => {
    stopTransitions();
    ctx.events.off('check', onCheck);
  };
}
