/**
 * What the chaos tests share: the rules (one key per failure mode), the traffic mix, a Redis with
 * real `tollgate serve --redis` nodes in front of it, and the measurements (RSS, exact counting,
 * what each failure mode answered).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { metricValue, type Sample } from './load.js';
import { pings, startRedis, type RedisServer } from './redis.js';
import { startServiceProcess, type ServiceProcess } from './service.js';

export const LOCAL_LIMIT = 40;
export const EXACT_LIMIT = 20;

export const CHAOS_RULES = `
domain: chaos
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
  - key: open_key
    rate_limit: { unit: hour, requests_per_unit: 5, failure_mode: open }
  - key: closed_key
    rate_limit: { unit: hour, requests_per_unit: 1000000, failure_mode: closed }
  - key: local_key
    rate_limit: { unit: hour, requests_per_unit: ${LOCAL_LIMIT} }
  - key: exact
    rate_limit: { unit: hour, requests_per_unit: ${EXACT_LIMIT} }
`;

/** Which key the i-th request checks: mostly plain traffic, a share for each failure mode. */
export const keyOf = (i: number): string => ['user', 'user', 'user', 'user', 'user', 'user', 'open_key', 'closed_key', 'local_key', 'local_key'][i % 10]!;

/** One counter per failure-mode key (so local's bound shows); plain traffic spread over 50. */
export const valueOf = (i: number, key: string): string => (key === 'user' ? `v${i % 50}` : 'hot');

export const ping = (redis: RedisServer): boolean => pings(redis.port);

/** A Redis and `count` service nodes on it (rules above), started before the file's tests, stopped after. */
export function useChaosNodes(count: number, args: readonly string[], redisArgs: string[] = []): { readonly redis: RedisServer; readonly nodes: readonly ServiceProcess[] } {
  let redis: RedisServer | undefined;
  let dir: string | undefined;
  const nodes: ServiceProcess[] = [];
  beforeAll(async () => {
    redis = await startRedis(redisArgs);
    dir = mkdtempSync(join(tmpdir(), 'tollgate-chaos-'));
    writeFileSync(join(dir, 'rules.yaml'), CHAOS_RULES);
    for (let i = 0; i < count; i++) nodes.push(await startServiceProcess(['--redis', redis.url, '--config', join(dir, 'rules.yaml'), ...args]));
  }, 30_000);
  afterAll(async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  return {
    get redis() {
      return redis!;
    },
    nodes,
  };
}

/** Checks `exact` once per request, alternating nodes; how many were admitted. */
export async function admittedOf(nodes: readonly ServiceProcess[], attempts: number, value: string): Promise<number> {
  let admitted = 0;
  for (let i = 0; i < attempts; i++) {
    const body = JSON.stringify({ domain: 'chaos', descriptors: [{ entries: [{ key: 'exact', value }] }] });
    const response = await fetch(nodes[i % nodes.length]!.url('/v1/check'), { method: 'POST', body });
    expect(response.headers.get('tollgate-degraded')).toBeNull();
    if (response.status === 200) admitted += 1;
    await response.arrayBuffer();
  }
  return admitted;
}


/** What each failure mode answered during the outage, and the answers that break its promise. */
export function modeCounts(outage: readonly Sample[]) {
  const of = (key: string) => outage.filter((s) => s.key === key);
  const local = of('local_key');
  return {
    open: of('open_key').length,
    openWrong: of('open_key').filter((s) => s.status !== 200 || s.degraded !== 'fail-open'),
    closed: of('closed_key').length,
    closedWrong: of('closed_key').filter((s) => s.status !== 429 || s.degraded !== 'fail-closed'),
    local: local.length,
    localWrong: local.filter((s) => s.degraded !== 'local-fallback'),
    localAdmitted: local.filter((s) => s.status === 200).length,
  };
}

/**
 * The nodes' /metrics pages over one run, with the largest event-loop delay each node reported
 * (prom-client resets its delay histogram at every scrape, so each page covers the time since the
 * one before: `start()` scrapes once to begin the run, and every page read through `page` counts).
 */
export class NodeScrapes {
  private readonly lagMaxMs: number[];

  constructor(private readonly nodes: readonly ServiceProcess[]) {
    this.lagMaxMs = nodes.map(() => 0);
  }

  /** Begins the run: what the nodes' loops did before it (start-up included) does not count. */
  async start(): Promise<void> {
    await Promise.all(this.nodes.map((_, i) => this.page(i)));
    this.lagMaxMs.fill(0);
  }

  async page(i: number): Promise<string> {
    const page = await (await fetch(this.nodes[i]!.admin('/metrics'))).text();
    this.lagMaxMs[i] = Math.max(this.lagMaxMs[i]!, (metricValue(page, 'nodejs_eventloop_lag_max_seconds') ?? 0) * 1_000);
    return page;
  }

  /**
   * Each node's checks slower than the deadline allows (its own measure, from the request read to
   * the answer built: what the deadline bounds, without the load generator's delays). A check waits
   * for the node's event loop as well as for the store, so the bound is the deadline plus the
   * longest stall of the node's own loop during the run (at least 2 × `deadlineMs`), rounded up to
   * the next bucket of `tollgate_check_duration_seconds` (…, 0.1, 0.25, 0.5, 1 s). On a quiet
   * machine that is 100 ms; a check the deadline failed to cut short (a stalled Redis holds it for
   * seconds) passes any of them.
   */
  async slowChecks(deadlineMs: number): Promise<{ readonly over: number; readonly boundMs: number; readonly lagMaxMs: number }[]> {
    return Promise.all(
      this.nodes.map(async (_, i) => {
        const page = await this.page(i);
        const lagMaxMs = this.lagMaxMs[i]!;
        const buckets = [...page.matchAll(/^tollgate_check_duration_seconds_bucket\{le="([^"]+)",transport="check"\} (\d+)$/gm)].map(([, le, count]) => [le === '+Inf' ? Number.POSITIVE_INFINITY : Number(le), Number(count)] as const);
        const total = buckets.find(([le]) => le === Number.POSITIVE_INFINITY)?.[1] ?? Number.NaN;
        const wanted = Math.max(2 * deadlineMs, deadlineMs + lagMaxMs) / 1_000;
        const [bound, within] = buckets.find(([le]) => le >= wanted - 1e-9) ?? [Number.POSITIVE_INFINITY, total];
        return { over: total - within, boundMs: bound * 1_000, lagMaxMs: Math.round(lagMaxMs) };
      }),
    );
  }
}

/**
 * When `node` was answering from the shared counters again after `from`: the first answer after
 * which its next `run` answers are all normal (a stray late answer on a loaded machine, later on,
 * is a deadline doing its job, not a failed recovery). Undefined if that never happened.
 */
export function recoveredAt(samples: readonly Sample[], node: number, from: number, run = 20): number | undefined {
  const own = samples.filter((s) => s.node === node && s.at >= from);
  for (let i = 0; i + run <= own.length; i++) {
    if (own.slice(i, i + run).every((s) => s.degraded === null)) return own[i]!.at;
  }
  return undefined;
}
