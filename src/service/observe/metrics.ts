/**
 * Prometheus metrics at GET /metrics, on a registry of this service's own (never prom-client's
 * global one, so two services in one process, or an embedding application, do not mix counts).
 *
 * Counters follow the service's event stream (`ctx.events`); the rest (rules version, reloads,
 * memory-store keys and evictions) is read at scrape time. Label values come from the rules
 * (domains, rule paths) or from small fixed sets; the one exception, the domains of checks whose
 * domain is not in the rules, is capped ({@link UNKNOWN_DOMAIN_CAP}), so cardinality stays bounded.
 *
 * With `--workers N` a scrape answers the sum over the workers (cluster/metrics-merge.ts).
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { CheckEvent, RejectedEvent, ServiceContext, StoreErrorEvent } from '../context.js';
import type { HttpRoutes } from '../http/listener.js';
import {
  classifyCheck,
  LIMIT_API,
  NEAR_LIMIT_SHARE,
  ruleIndex,
  UNKNOWN_DOMAIN,
  UNKNOWN_DOMAIN_CAP,
  type DescriptorReason,
  type DescriptorResult,
} from '../check/outcomes.js';
import type { MemoryStoreStats } from '../../store/memory.js';
import { defineStoreHealthMetrics } from '../health/store-health.js';
import { BoundedCounts, FastHistogram, OVERFLOW_LABEL, Tally } from './metric-tally.js';
import { workerLink, type WorkerLink } from '../cluster/workers.js';
import { mergeWorkerMetrics, WORKER_LABEL } from '../cluster/metrics-merge.js';
import { HttpError, sendJson } from '../http/body.js';
import { defineSettleMetrics } from './settle-metrics.js';
import { defineSlotMetrics } from './slot-metrics.js';
import { defineLedgerMetrics } from './ledger-metrics.js';

/** A listener for each of the service's events (the metrics and the dashboard each have one set). */
export interface EventListeners {
  check(event: CheckEvent): void;
  rejected(event: RejectedEvent): void;
  storeError(event: StoreErrorEvent): void;
}

/** Adds `listeners` to the service's event stream; returns what removes them. */
export function listenToEvents(ctx: ServiceContext, listeners: EventListeners): () => void {
  ctx.events.on('check', listeners.check);
  ctx.events.on('rejected', listeners.rejected);
  ctx.events.on('storeError', listeners.storeError);
  return () => {
    ctx.events.off('check', listeners.check);
    ctx.events.off('rejected', listeners.rejected);
    ctx.events.off('storeError', listeners.storeError);
  };
}

/** Puts a malformed-request message in one of a few buckets (the message holds request values). */
export function rejectionReason(message: string): 'invalid_json' | 'body_too_large' | 'invalid_rules' | 'invalid_request' {
  if (/not valid JSON/i.test(message)) return 'invalid_json';
  if (/\bbytes\b/.test(message) && /\b(at most|over)\b/.test(message)) return 'body_too_large';
  // RulesError: `file:line:column: path: problem`.
  if (/^[^\n]*?:\d+:\d+: /.test(message)) return 'invalid_rules';
  return 'invalid_request';
}

/** Most distinct store-error kinds given their own series; later ones are counted as `other`. */
const MAX_STORE_ERROR_KINDS = 16;

/** The memory store's counters, when the store is one. */
export function memoryStats(ctx: ServiceContext): MemoryStoreStats | undefined {
  const store = ctx.store as { stats?: () => MemoryStoreStats };
  return typeof store.stats === 'function' ? store.stats() : undefined;
}

/** Why a descriptor got its result, as the index of its count in a {@link Tally} row. */
const REASONS: readonly DescriptorReason[] = ['within_limit', 'limit_exceeded', 'other_limit_exceeded', 'shadow_mode', 'blocked', 'no_rule', 'unknown_domain', 'allow_list', 'deny_list'];
const REASON_INDEX = new Map(REASONS.map((reason, i) => [reason, i]));
/** The result each reason implies. */
const RESULT_OF: Readonly<Record<DescriptorReason, DescriptorResult>> = {
  within_limit: 'ok',
  limit_exceeded: 'over_limit',
  other_limit_exceeded: 'ok',
  shadow_mode: 'shadow_over_limit',
  blocked: 'over_limit',
  no_rule: 'ok',
  unknown_domain: 'ok',
  allow_list: 'ok',
  deny_list: 'over_limit',
};
/** In a (domain, rule) row, after the reasons: near-limit decisions, shadow-mode hits, then blocks started. */
const NEAR_INDEX = REASONS.length;
const SHADOW_INDEX = REASONS.length + 1;
const BLOCK_STARTED_INDEX = REASONS.length + 2;

/**
 * The check-duration histogram's buckets, in seconds. From 10 µs: a memory-store decision takes a
 * few µs, and the dashboard's p50 / p99 are read from this histogram.
 */
export const CHECK_DURATION_BOUNDS: readonly number[] = [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** The counters fed by the event stream (the rest of the metrics is read at scrape time). */
type EventMetrics = ReturnType<typeof defineEventMetrics>;

/**
 * The per-check counters. A check adds to plain tallies (metric-tally.ts); each counter takes what
 * its tally holds when it is scraped.
 */
function defineEventMetrics(registers: Registry[]) {
  const byRule = new Tally(BLOCK_STARTED_INDEX + 1);
  const byDomain = new Tally(2);
  return {
    byRule,
    byDomain,
    ...defineRuleCounters(registers, byRule),
    checks: new Counter({
      name: 'tollgate_checks_total',
      help: `Answered check requests by domain ("${UNKNOWN_DOMAIN}" when not in the rules, "${LIMIT_API}" for POST /v1/limit), transport (json, check, grpc, gateway, limit) and overall result (ok, over_limit).`,
      labelNames: ['domain', 'transport', 'result'] as const,
      registers,
      collect() {
        byDomain.drain((domain, transport, index, amount) => this.inc({ domain, transport, result: index === 0 ? 'ok' : 'over_limit' }, amount));
      },
    }),
    duration: new FastHistogram(
      'tollgate_check_duration_seconds',
      'Time to decide a check (rules lookup and store round trip), by transport.',
      'transport',
      CHECK_DURATION_BOUNDS,
      registers,
    ),
    unknownDomains: defineUnknownDomainCounter(registers),
    rejected: new Counter({
      name: 'tollgate_rejected_requests_total',
      help: 'Requests refused as malformed (HTTP 400/413, gRPC INVALID_ARGUMENT), by transport and reason (invalid_json, body_too_large, invalid_rules, invalid_request).',
      labelNames: ['transport', 'reason'] as const,
      registers,
    }),
    storeErrors: new Counter({
      name: 'tollgate_store_errors_total',
      help: `Decisions that failed on the store, by error kind (at most ${MAX_STORE_ERROR_KINDS} kinds, then "other").`,
      labelNames: ['kind'] as const,
      registers,
    }),
  };
}

/**
 * Checks naming a domain not in the rules, by that domain: the first sign of a misconfigured
 * Envoy. The domain comes from the request, so distinct values are capped ({@link UNKNOWN_DOMAIN_CAP}).
 */
function defineUnknownDomainCounter(registers: Registry[]): BoundedCounts {
  const counts = new BoundedCounts(UNKNOWN_DOMAIN_CAP);
  const seen = new Map<string, number>();
  new Counter({
    name: 'tollgate_unknown_domain_checks_total',
    help: `Checks whose domain is not in the rules, by that domain (the first ${UNKNOWN_DOMAIN_CAP} distinct domains per process; later ones as "${OVERFLOW_LABEL}").`,
    labelNames: ['domain'] as const,
    registers,
    collect() {
      for (const [domain, total] of counts.entries()) {
        this.inc({ domain }, total - (seen.get(domain) ?? 0));
        seen.set(domain, total);
      }
    },
  });
  return counts;
}

/** The counters by (domain, rule): decisions by result and reason, near-limit decisions, shadow-mode hits. */
function defineRuleCounters(registers: Registry[], byRule: Tally) {
  // Registered in this order, the order of the families at /metrics: decisions is scraped first,
  // and its collect hands the near-limit and shadow-mode columns of the rows to the two after it.
  const decisions = new Counter({
    name: 'tollgate_decisions_total',
    help: 'Descriptor decisions (POST /v1/limit: domain and rule "(v1/limit)") by domain, rule path, result (ok, over_limit, shadow_over_limit) and reason (within_limit, limit_exceeded, other_limit_exceeded, shadow_mode, blocked: refused by a penalty during its block or by a block set by hand, no_rule, unknown_domain, allow_list, deny_list).',
    labelNames: ['domain', 'rule', 'result', 'reason'] as const,
    registers,
    collect() {
      byRule.drain((domain, rule, index, amount) => {
        if (index === NEAR_INDEX) nearLimit.inc({ domain, rule }, amount);
        else if (index === SHADOW_INDEX) shadowHits.inc({ domain, rule }, amount);
        else if (index === BLOCK_STARTED_INDEX) blocksStarted.inc({ domain, rule }, amount);
        else this.inc({ domain, rule, result: RESULT_OF[REASONS[index]!], reason: REASONS[index]! }, amount);
      });
    },
  });
  const nearLimit = new Counter({
    name: 'tollgate_near_limit_total',
    help: `Admitted decisions that left at most ${NEAR_LIMIT_SHARE * 100}% of the limit's quota, by domain and rule path.`,
    labelNames: ['domain', 'rule'] as const,
    registers,
  });
  const shadowHits = new Counter({
    name: 'tollgate_shadow_mode_hits_total',
    help: 'Shadow-mode limits exceeded (the request would have been denied; it was admitted), by domain and rule path.',
    labelNames: ['domain', 'rule'] as const,
    registers,
  });
  const blocksStarted = new Counter({
    name: 'tollgate_blocks_started_total',
    help: 'Penalties started (block_duration): denials by a limit\'s quota that blocked its key, by domain and rule path. The refusals during a block are tollgate_decisions_total{reason="blocked"}.',
    labelNames: ['domain', 'rule'] as const,
    registers,
  });
  return { decisions, nearLimit, shadowHits, blocksStarted };
}

/** The rules in force, read at scrape time. */
function defineRulesMetrics(ctx: ServiceContext, registers: Registry[]): void {
  new Gauge({
    name: 'tollgate_rules_info',
    help: 'The rules in force: 1 for the current version (a content hash).',
    labelNames: ['version'] as const,
    registers,
    collect() {
      this.reset();
      this.set({ version: ctx.holder.current.version }, 1);
    },
  });
  new Gauge({
    name: 'tollgate_rules_domains',
    help: 'Domains in the rules in force.',
    registers,
    collect() {
      this.set(ctx.holder.current.domainNames().length);
    },
  });
  new Gauge({
    name: 'tollgate_rules_rules',
    help: 'Limits (rule paths) in the rules in force.',
    registers,
    collect() {
      this.set(ruleIndex(ctx.holder.current).size);
    },
  });
}

/** Reloads of the rules from files (the watcher) and from pushes (the sync), read at scrape time. */
function defineReloadMetrics(ctx: ServiceContext, registers: Registry[]): void {
  // Reload counts live in the watcher and the sync; the counter follows them by their increase.
  const seenReloads = new Map<string, number>();
  new Counter({
    name: 'tollgate_rules_reloads_total',
    help: 'Rules reloads by source (watcher: files on disk; sync: pushed through Redis) and result (applied, refused: the last good rules stayed in force).',
    labelNames: ['source', 'result'] as const,
    registers,
    collect() {
      const follow = (source: 'watcher' | 'sync', result: 'applied' | 'refused', total: number): void => {
        const id = `${source}/${result}`;
        const increase = total - (seenReloads.get(id) ?? 0);
        if (increase > 0 || !seenReloads.has(id)) this.inc({ source, result }, Math.max(0, increase));
        seenReloads.set(id, Math.max(total, seenReloads.get(id) ?? 0));
      };
      const watched = ctx.watcher?.status();
      if (watched !== undefined) {
        follow('watcher', 'applied', watched.reloads);
        follow('watcher', 'refused', watched.failures);
      }
      const pushed = ctx.sync?.status();
      if (pushed !== undefined) {
        follow('sync', 'applied', pushed.applied);
        follow('sync', 'refused', pushed.refused);
      }
    },
  });
  new Gauge({
    name: 'tollgate_rules_reload_failing',
    help: 'Whether the latest reload from this source was refused (1) or not (0); the last good rules stay in force meanwhile.',
    labelNames: ['source'] as const,
    registers,
    collect() {
      if (ctx.watcher !== undefined) this.set({ source: 'watcher' }, ctx.watcher.status().lastError === undefined ? 0 : 1);
      if (ctx.sync !== undefined) this.set({ source: 'sync' }, ctx.sync.status().lastError === undefined ? 0 : 1);
    },
  });
  if (ctx.sync !== undefined) {
    new Gauge({
      name: 'tollgate_rules_pushed_version',
      help: 'The version of the rules pushed through Redis in force on this node (0: none yet).',
      registers,
      collect() {
        this.set(ctx.sync?.status().version ?? 0);
      },
    });
  }
}

/** The memory store's keys, state spaces, evictions and expiries, read at scrape time (nothing for another store). */
function defineMemoryStoreMetrics(ctx: ServiceContext, registers: Registry[]): void {
  if (memoryStats(ctx) === undefined) return;
  new Gauge({
    name: 'tollgate_memory_store_keys',
    help: 'Keys held by the memory store.',
    registers,
    collect() {
      this.set(memoryStats(ctx)?.keys ?? 0);
    },
  });
  new Gauge({
    name: 'tollgate_memory_store_state_spaces',
    help: 'States (algorithm and window pairs) the memory store holds keys of: at most its keys, however many windows requests name.',
    registers,
    collect() {
      this.set(memoryStats(ctx)?.spaces ?? 0);
    },
  });
  new Gauge({
    name: 'tollgate_memory_store_max_keys',
    help: 'Most keys the memory store holds before evicting the least recently used.',
    registers,
    collect() {
      this.set(memoryStats(ctx)?.maxKeys ?? 0);
    },
  });
  const seenStats = { evictions: 0, expired: 0 };
  const follow = (field: 'evictions' | 'expired') =>
    function (this: Counter) {
      const total = memoryStats(ctx)?.[field] ?? 0;
      if (total > seenStats[field]) this.inc(total - seenStats[field]);
      seenStats[field] = Math.max(total, seenStats[field]);
    };
  new Counter({
    name: 'tollgate_memory_store_evictions_total',
    help: 'Keys the memory store dropped to make room (least recently used first).',
    registers,
    collect: follow('evictions'),
  });
  new Counter({
    name: 'tollgate_memory_store_expired_total',
    help: 'Keys the memory store reclaimed because their state had expired.',
    registers,
    collect: follow('expired'),
  });
}

/** Counts the service's events on `metrics`; returns the unsubscribe. */
function subscribeMetrics(ctx: ServiceContext, metrics: EventMetrics): () => void {
  const onCheck = (event: CheckEvent): void => {
    const outcomes = classifyCheck(ctx.holder.current, event);
    for (const outcome of outcomes) {
      metrics.byRule.add(outcome.domain, outcome.rule, REASON_INDEX.get(outcome.reason)!);
      if (outcome.near) metrics.byRule.add(outcome.domain, outcome.rule, NEAR_INDEX);
      if (outcome.result === 'shadow_over_limit') metrics.byRule.add(outcome.domain, outcome.rule, SHADOW_INDEX);
      if (outcome.blockStarted === true) metrics.byRule.add(outcome.domain, outcome.rule, BLOCK_STARTED_INDEX);
    }
    let domain = event.domain;
    if (event.via === 'limit') domain = LIMIT_API;
    else if (ctx.holder.current.domain(event.domain) === undefined) {
      domain = UNKNOWN_DOMAIN;
      metrics.unknownDomains.add(event.domain);
    }
    metrics.byDomain.add(domain, event.via, event.result.overallCode === 'OK' ? 0 : 1);
    metrics.duration.observe(event.via, event.durationMs / 1_000);
  };
  const onRejected = (event: RejectedEvent): void => {
    metrics.rejected.inc({ transport: event.via, reason: rejectionReason(event.reason) });
  };
  const kinds = new Set<string>();
  const onStoreError = (event: StoreErrorEvent): void => {
    let kind = /^[A-Za-z0-9_.-]{1,64}$/.test(event.kind) ? event.kind : 'other';
    if (!kinds.has(kind)) {
      if (kinds.size < MAX_STORE_ERROR_KINDS) kinds.add(kind);
      else kind = 'other';
    }
    metrics.storeErrors.inc({ kind });
  };
  return listenToEvents(ctx, { check: onCheck, rejected: onRejected, storeError: onStoreError });
}

/**
 * The registry a scrape is answered from: this process's own (one process), or every worker's
 * merged by the primary (`--workers N`; undefined when the primary did not answer: a partial sum
 * would look like a counter reset). `byWorker`: one series per worker, labelled `worker`.
 */
async function registryToShow(registry: Registry, link: WorkerLink | undefined, byWorker: boolean): Promise<Registry | undefined> {
  if (link === undefined) {
    if (!byWorker) return registry;
    return mergeWorkerMetrics({ live: [{ worker: 0, pid: process.pid, data: await registry.getMetricsAsJSON() }], exited: undefined }, true);
  }
  try {
    return mergeWorkerMetrics(await link.collect('metrics'), byWorker);
  } catch {
    return undefined;
  }
}

const checkDurations = new WeakMap<ServiceContext, FastHistogram>();

/**
 * The check-duration histogram of `ctx`'s metrics (the dashboard reads its latency from it, so a
 * check is observed once), or undefined before the metrics are attached.
 */
export function checkDurationOf(ctx: ServiceContext): FastHistogram | undefined {
  return checkDurations.get(ctx);
}

/** Registers the metrics on a new registry and serves them at GET /metrics (`?by=worker`: per worker). */
export function attachMetrics(ctx: ServiceContext, routes: HttpRoutes): { readonly registry: Registry; close(): void } {
  const registry = new Registry();
  const registers = [registry];
  // The order of registration is the order of the families at GET /metrics.
  collectDefaultMetrics({ register: registry });
  const eventMetrics = defineEventMetrics(registers);
  checkDurations.set(ctx, eventMetrics.duration);
  defineRulesMetrics(ctx, registers);
  defineReloadMetrics(ctx, registers);
  defineMemoryStoreMetrics(ctx, registers);
  defineLedgerMetrics(ctx, registers);
  const stopHealth = defineStoreHealthMetrics(ctx, registers);
  const unsubscribe = subscribeMetrics(ctx, eventMetrics);
  const stopSlots = defineSlotMetrics(ctx, registers);
  const stopSettles = defineSettleMetrics(ctx, registers);

  const link = workerLink(ctx.options.workers);
  link?.produce('metrics', () => registry.getMetricsAsJSON());
  routes.add('GET', '/metrics', async (_request, response, url) => {
    const by = url().searchParams.get('by');
    if (by !== null && by !== WORKER_LABEL) throw new HttpError(400, `by must be "${WORKER_LABEL}" (one series per worker) or absent (the sum over the workers), got ${JSON.stringify(by)}`);
    const shown = await registryToShow(registry, link, by === WORKER_LABEL);
    if (shown === undefined) {
      sendJson(response, 503, { error: 'workers_unavailable', code: 'ERR_TOLLGATE_INTERNAL', message: 'the primary did not collect the workers\' metrics in time; scrape again' }, { 'retry-after': '1' });
      return;
    }
    const text = await shown.metrics();
    response.writeHead(200, { 'content-type': registry.contentType, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
    response.end(text);
  });

  return {
    registry,
    close: () => {
      unsubscribe();
      stopSlots();
      stopSettles();
      stopHealth();
      registry.clear();
    },
  };
}
