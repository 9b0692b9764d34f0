/**
 * Chaos: a Redis that stops answering without closing its connections (SIGSTOP for 4 s, then
 * SIGCONT), and a Redis that forgets its scripts (SCRIPT FLUSH) under steady load, with two real
 * `tollgate serve --redis` nodes. A stalled store costs one deadline per check until the breaker
 * opens, then nothing; calls in flight stay bounded; recovery is clean. A flushed script costs
 * nothing at all: zero failed, zero degraded decisions.
 */
import { describe, expect, it } from 'vitest';
import { EXACT_LIMIT, NodeScrapes, admittedOf, keyOf, recoveredAt, modeCounts, useChaosNodes, valueOf } from '../../support/chaos.js';
import { max, metricValue, sleep, startLoad } from '../../support/load.js';
import { FALLBACK_CAUSES } from '../../../src/service/observe/dashboard-health.js';

const DEADLINE_MS = 50;
const NODES = 2;
/**
 * Without the over-limit cache: a key the store denied before the outage would stay denied by the
 * cache until its retry instant, and this test is about what the failure modes answer.
 */
const NO_CACHE = ['--local-cache-keys', '0'];

describe('Redis stalled (SIGSTOP 4 s) and its scripts flushed, under load', () => {
  const chaos = useChaosNodes(NODES, ['--expected-nodes', String(NODES), '--deadline-ms', String(DEADLINE_MS), ...NO_CACHE]);
  const { nodes } = chaos;
  const urls = (): string[] => nodes.map((node) => node.url(''));
  /** Every node's `tollgate_store_fallbacks_total`, summed by cause. */
  const fallbacksByCause = async (): Promise<Record<string, number>> => {
    const pages = await Promise.all(nodes.map(async (node) => (await fetch(node.admin('/metrics'))).text()));
    return Object.fromEntries(FALLBACK_CAUSES.map((cause) => [cause, pages.reduce((sum, page) => sum + (metricValue(page, `tollgate_store_fallbacks_total{cause="${cause}"}`) ?? 0), 0)]));
  };

  it('SCRIPT FLUSH under load: zero failed decisions, and none degraded by a store error', async () => {
    const before = await fallbacksByCause();
    const load = startLoad(urls(), { perSecond: 200, keyOf, valueOf, domain: 'chaos' });
    for (let i = 0; i < 5; i++) {
      await sleep(300);
      expect(chaos.redis.cli('SCRIPT', 'FLUSH').trim()).toBe('OK');
    }
    await sleep(300);
    const samples = await load.stop();
    const after = await fallbacksByCause();
    const added = Object.fromEntries(FALLBACK_CAUSES.map((cause) => [cause, after[cause]! - before[cause]!]));
    const degraded = samples.filter((s) => s.degraded !== null).length;
    console.log(`[chaos:flush] checks=${samples.length} flushes=5 failed=${samples.filter((s) => s.status === 0 || s.status >= 500).length} degraded=${degraded} fallbacks=${JSON.stringify(added)}`);
    expect(samples.length).toBeGreaterThan(100);
    expect(samples.filter((s) => s.status === 0 || s.status >= 500)).toEqual([]);
    // A flushed script is reloaded and the call sent again: a NOSCRIPT never reaches a decision
    // as a store error. A busy machine can still push a check past the 50 ms deadline (the
    // reload is one more round trip) — those are timeouts, and the breaker they may open, not errors.
    expect(added.error).toBe(0);
    expect(degraded).toBeLessThanOrEqual(added.timeout! + added['breaker-open']! + added.overload!);
  }, 20_000);

  it('SIGSTOP: timeouts turn into failure-mode answers within the deadline, no pile-up, clean recovery', async () => {
    const redis = chaos.redis;
    const scrapes = new NodeScrapes(nodes);
    await scrapes.start();
    const load = startLoad(urls(), { perSecond: 200, keyOf, valueOf, domain: 'chaos' });
    await sleep(1_000);
    process.kill(redis.pid, 'SIGSTOP');
    const stoppedAt = Date.now();
    const inFlight: number[] = [];
    for (let i = 0; i < 6; i++) {
      await sleep(600);
      for (let node = 0; node < nodes.length; node++) inFlight.push(metricValue(await scrapes.page(node), 'tollgate_store_calls_in_flight') ?? -1);
    }
    process.kill(redis.pid, 'SIGCONT');
    const resumedAt = Date.now();
    await sleep(2_000);
    const samples = await load.stop();
    const slow = await scrapes.slowChecks(DEADLINE_MS);

    expect(samples.filter((s) => s.status === 0 || s.status >= 500)).toEqual([]);
    const stall = samples.filter((s) => s.at >= stoppedAt && s.at + s.ms < resumedAt);
    const firstDegraded = samples.find((s) => s.at >= stoppedAt && s.degraded !== null)!;
    const engageMs = firstDegraded.at + firstDegraded.ms - stoppedAt;
    const stallMaxMs = max(stall.map((s) => s.ms));
    const recoveryMs = nodes.map((_, node) => (recoveredAt(samples, node, resumedAt) ?? Number.POSITIVE_INFINITY) - resumedAt);
    const modes = modeCounts(stall.filter((s) => s.at >= firstDegraded.at + DEADLINE_MS));
    const admittedAfter = await admittedOf(nodes, EXACT_LIMIT + 10, `after-stall-${Date.now()}`);
    console.log(
      `[chaos:stop] checks=${samples.length} stalled=${stall.length} engage=${engageMs.toFixed(0)}ms stallMax=${stallMaxMs.toFixed(1)}ms (client) serverSlow=${slow.map((n) => `${n.over}>${n.boundMs}ms`).join('/')} loopLagMax=${slow.map((n) => n.lagMaxMs).join('/')}ms ` +
        `maxInFlight=${max(inFlight)} recovery=${recoveryMs.map((ms) => ms.toFixed(0)).join('/')}ms lastDegraded=${nodes.map((_, node) => (samples.filter((s) => s.node === node && s.degraded !== null).at(-1)?.at ?? 0) - resumedAt).join('/')}ms localAdmitted=${modes.localAdmitted}/${modes.local} exactAfter=${admittedAfter}`,
    );

    // The load generator's own delays count in engageMs; the deadline bound is checked on the nodes' own clocks.
    expect(engageMs).toBeLessThanOrEqual(DEADLINE_MS + 100);
    expect(slow.map((n) => n.over)).toEqual(nodes.map(() => 0));
    // While Redis is stopped, only the breaker's probes go out: nothing piles up.
    expect(max(inFlight)).toBeLessThanOrEqual(10);
    for (const ms of recoveryMs) expect(ms).toBeLessThan(1_000);
    expect(modes.openWrong).toEqual([]);
    expect(modes.closedWrong).toEqual([]);
    expect(modes.localWrong).toEqual([]);
    expect(admittedAfter).toBe(EXACT_LIMIT);
  }, 30_000);
});
