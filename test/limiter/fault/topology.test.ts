/**
 * Topology changes under load, on real Redis processes: a Sentinel failover (primary SIGKILLed), a
 * Cluster master SIGKILLed until its replica takes over, a hash slot moved between masters (ASK,
 * then MOVED), and a Redis restarted after a long outage (the reconnect backoff's cap). Each
 * measures its failure window and checks that decisions are exact again after it. The figures go
 * to the log (and to docs/operations.md, "Topology changes").
 */
import calculateSlot from 'cluster-key-slot';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, StoreUnavailableError, compilePolicy, createLimiter, redisStore, type Policy, type RedisStore } from '../../../src/index.js';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { reconnectDelay } from '../../../src/store/redis/connect.js';
import {
  clusterNodes,
  faultReport,
  keyInSlot,
  migrateSlot,
  poll,
  serverOn,
  slotOwner,
  startLoad,
  startSentinelSet,
  waitForClusterFailover,
  type LoadRecord,
  type SentinelSet,
} from '../../support/redis-failover.js';
import { cliAsync, freePort, startRedis } from '../../support/redis.js';
import { useRedisCluster } from '../../support/redis-topologies.js';
import { startServiceProcess } from '../../support/service.js';

const run = Math.random().toString(36).slice(2, 8);
/** Every call admitted: the count of admitted decisions is readable back as limit − remaining. */
const counting: Policy = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1h', windowStart: 'first-hit' };
const tenPerHour: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h', windowStart: 'first-hit' };
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** How many decisions `key` has recorded under {@link counting}. */
/**
 * These tests measure the store itself through a topology change, so a failure surfaces as the
 * store's error instead of a failure mode's answer: no breaker, a deadline past the store's own.
 */
const RAW_STORE = { failureMode: 'throw', breaker: false, deadlineMs: 10_000 } as const;

async function recorded(limiter: ReturnType<typeof createLimiter>, key: string): Promise<number> {
  // A peek answers what would remain after one more: limit − recorded − 1.
  return counting.limit - (await limiter.peek(key, counting)).remaining - 1;
}

/** N + 5 simultaneous calls on a fresh key with a limit of 10: how many were admitted. */
async function admittedOfFifteen(limiter: ReturnType<typeof createLimiter>, key: string): Promise<number> {
  const decisions = await Promise.all(Array.from({ length: 15 }, () => limiter.limit(key, tenPerHour)));
  return decisions.filter((decision) => decision.allowed).length;
}

/** The longest the event loop stalled while `body` ran, in ms (a stall longer than the command timeout fails calls on its own). */
async function measuringStalls<T>(body: () => Promise<T>): Promise<[T, number]> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  try {
    return [await body(), Math.round(delay.max / 1e6)];
  } finally {
    delay.disable();
  }
}

/** Waits until a call started after `since` succeeded, then lets the load run `tailMs` more. */
async function recovery(records: readonly LoadRecord[], since: number, tailMs = 500): Promise<void> {
  await poll(async () => (records.some((record) => record.ok && record.start >= since) ? true : undefined), 'a decision to succeed again', 15_000);
  await sleep(tailMs);
}

describe('Redis Sentinel', () => {
  let set: SentinelSet;
  beforeAll(async () => {
    set = await startSentinelSet();
  }, 30_000);
  afterAll(async () => {
    await set?.stop();
  });

  it('decides through a failover: errors only from the kill to the first success, exact after', async () => {
    const store = redisStore({ sentinels: set.sentinels, name: set.name });
    try {
      await store.ready();
      expect(store.address).toBe(`sentinel mymaster via ${set.sentinels.map((node) => `127.0.0.1:${node.port}`).join(',')}`);
      const limiter = createLimiter({ store, ...RAW_STORE });
      const key = `${run}:sentinel-load`;
      const [{ killedAt, newPrimary, promotedAt, records }, stall] = await measuringStalls(async () => {
        const load = startLoad(() => limiter.limit(key, counting));
        await sleep(300);
        const killedAt = Date.now();
        await set.killPrimary();
        const newPrimary = await set.waitForFailover();
        const promotedAt = Date.now();
        await recovery(load.records, killedAt);
        return { killedAt, newPrimary, promotedAt, records: await load.stop() };
      });
      const report = faultReport(records, killedAt);
      const admitted = records.filter((record) => record.ok).length;
      const stored = await recorded(limiter, key);
      console.log(
        `[topology] sentinel failover: ${report.calls} calls every 5 ms; primary SIGKILLed, sentinels agreed on ${newPrimary} after ${promotedAt - killedAt} ms; ` +
          `window ${report.windowMs} ms, ${report.errorsInWindow} errors in it, ${report.errorsBefore} before, ${report.errorsAfter} after; ` +
          `${admitted} admitted, ${stored} recorded (${admitted - stored} admitted but lost with the old primary; more recorded than admitted = failed calls that ran); longest event-loop stall ${stall} ms; errors: ${report.messages.join(' | ')}`,
      );
      expect(newPrimary).toBe(set.replica.port);
      expect(report.errorsBefore).toBe(0);
      expect(report.errorsAfter).toBe(0);
      expect(report.windowMs).toBeLessThan(10_000);
      // Errors only in the failover window: they end within 1.5 s of the new primary being named.
      expect(report.windowMs!).toBeLessThanOrEqual(promotedAt - killedAt + 1_500);
      // Counted at most once each: a decision that failed may have run, none that succeeded ran twice.
      expect(stored).toBeLessThanOrEqual(admitted + report.errorsInWindow);
      // Exact again, and on the new primary.
      const fresh = `${run}:sentinel-fresh`;
      expect(await admittedOfFifteen(limiter, fresh)).toBe(10);
      expect((await cliAsync(newPrimary, 'EXISTS', store.redisKey(fresh, compilePolicy(tenPerHour)))).trim()).toBe('1');
    } finally {
      await store.close();
    }
  }, 40_000);

  it('tollgate serve --redis-sentinel connects through the sentinels', async () => {
    const service = await startServiceProcess(['--redis-sentinel', set.sentinels.map((node) => `127.0.0.1:${node.port}`).join(','), '--log-level', 'info']);
    try {
      const listening = service.logs.find((line) => String(line.msg).startsWith('HTTP listening'));
      expect(listening?.store).toBe('redis');
    } finally {
      expect(await service.stop()).toBe(0);
    }
  }, 20_000);
});

describe('Redis Cluster with replicas', () => {
  const cluster = useRedisCluster(3, { replicas: 1 });

  it('decides through a master failover: errors only in the window, never CROSSSLOT, exact after', async () => {
    const store = redisStore({ cluster: cluster.nodes });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW_STORE });
      const seed = cluster.servers[0]!.port;
      const masters = (await clusterNodes(seed)).filter((node) => node.flags.includes('master') && node.slots.length > 0);
      expect(masters).toHaveLength(3);
      // One key on each master: a cross-slot group, decided by limitAll across the whole cluster.
      const group = masters.map((master, index) => keyInSlot(run, `group-${index}`, master.slots[0]![0]));
      const hot = group[0]!;
      const hotSlot = calculateSlot(hot);
      const victim = (await slotOwner(seed, hotSlot))!;
      const elsewhere = group[1]!;
      const [{ killedAt, promoted, promotedAt, records }, stall] = await measuringStalls(async () => {
        const loads = {
          hot: startLoad(() => limiter.limit(hot, counting)),
          group: startLoad(() => limiter.limitAll(group.map((key) => ({ key, policy: counting })))),
          elsewhere: startLoad(() => limiter.limit(elsewhere, counting)),
        };
        await sleep(300);
        const killedAt = Date.now();
        process.kill(serverOn(cluster, victim).pid, 'SIGKILL');
        const promoted = await waitForClusterFailover(cluster, victim, hotSlot);
        const promotedAt = Date.now();
        await recovery(loads.hot.records, killedAt);
        await recovery(loads.group.records, killedAt, 0);
        const records = { hot: await loads.hot.stop(), group: await loads.group.stop(), elsewhere: await loads.elsewhere.stop() };
        return { killedAt, promoted, promotedAt, records };
      });
      const reports = Object.fromEntries(Object.entries(records).map(([name, list]) => [name, faultReport(list, killedAt)]));
      const hotAdmitted = records.hot.filter((record) => record.ok).length + records.group.filter((record) => record.ok && record.allowed).length;
      const hotStored = await recorded(limiter, hot);
      console.log(
        `[topology] cluster failover: master ${victim} SIGKILLed, replica ${promoted} serving its slots after ${promotedAt - killedAt} ms; ` +
          Object.entries(reports)
            .map(([name, report]) => `${name}: ${report.calls} calls, window ${report.windowMs} ms, ${report.errorsInWindow} errors in it, ${report.errorsBefore} before, ${report.errorsAfter} after, last error at ${report.lastErrorMs} ms (${report.messages.join(' | ')})`)
            .join('; ') +
          `; hot key ${hotAdmitted} admitted, ${hotStored} recorded; longest event-loop stall ${stall} ms`,
      );
      const allErrors = Object.values(records).flatMap((list) => list.filter((record) => !record.ok).map((record) => record.error!));
      expect(allErrors.filter((message) => /CROSSSLOT/.test(message))).toEqual([]);
      for (const report of [reports.hot!, reports.group!]) {
        expect(report.errorsBefore).toBe(0);
        expect(report.errorsAfter).toBe(0);
        expect(report.windowMs).toBeLessThan(10_000);
      }
      // A key on a healthy master may still see timeouts while the cluster fails over (measured:
      // up to ~70 of ~500 calls), but none before the kill, and none once the replica is promoted.
      expect(reports.elsewhere!.errorsBefore).toBe(0);
      const failedLate = Object.values(records).flatMap((list) => list.filter((record) => !record.ok && record.end > promotedAt + 1_500));
      expect(failedLate).toEqual([]);
      expect(promoted).not.toBe(victim);
      expect(hotStored).toBeLessThanOrEqual(hotAdmitted + reports.hot!.errorsInWindow + reports.group!.errorsInWindow);
      // Exact again on the promoted replica.
      const fresh = keyInSlot(run, 'cluster-fresh', hotSlot);
      expect(await admittedOfFifteen(limiter, fresh)).toBe(10);
      expect((await cliAsync(promoted, 'EXISTS', store.redisKey(fresh, compilePolicy(tenPerHour)))).trim()).toBe('1');
    } finally {
      await store.close();
    }
  }, 40_000);
});

describe('a hash slot moved between masters under load (ASK, then MOVED)', () => {
  const cluster = useRedisCluster(3);

  it('loses and doubles no decision', async () => {
    // A command timeout of 10 s, as the limiter's deadline (RAW_STORE): a busy machine stalled this
    // process past the default 1 s once (13–20 calls timed out in one millisecond), which is not
    // what the test is about; a call lost by the move would still hang past it and fail the test.
    const store = redisStore({ cluster: cluster.nodes, commandTimeoutMs: 10_000 });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW_STORE });
      const slot = calculateSlot(`${run}:moving`);
      const keys = Array.from({ length: 6 }, (_, index) => keyInSlot(run, `moving-${index}`, slot));
      const from = (await slotOwner(cluster.servers[0]!.port, slot))!;
      const to = cluster.servers.find((server) => server.port !== from)!.port;
      const admitted = new Map(keys.map((key) => [key, 0]));
      let turn = 0;
      const single = startLoad(async () => {
        const key = keys[turn++ % keys.length]!;
        const decision = await limiter.limit(key, counting);
        if (decision.allowed) admitted.set(key, admitted.get(key)! + 1);
        return decision;
      }, 2);
      // Two keys of the slot in one script: while only one of them has moved, Redis answers TRYAGAIN.
      const pair = startLoad(async () => {
        const decisions = await limiter.limitAll([keys[0]!, keys[1]!].map((key) => ({ key, policy: counting })));
        if (decisions.every((decision) => decision.allowed)) for (const key of [keys[0]!, keys[1]!]) admitted.set(key, admitted.get(key)! + 1);
        return decisions;
      });
      await sleep(300);
      const startedAt = Date.now();
      const moved = await migrateSlot(cluster, slot, to, { keysPerStep: 1, pauseMs: 100 });
      const doneAt = Date.now();
      await sleep(300);
      const records = [...(await single.stop()), ...(await pair.stop())];
      const failed = records.filter((record) => !record.ok);
      const slowest = Math.max(...records.filter((record) => record.start >= startedAt && record.start <= doneAt).map((record) => record.end - record.start));
      const stored = await Promise.all(keys.map((key) => recorded(limiter, key)));
      console.log(
        `[topology] slot ${slot} moved ${from} → ${to} (${moved} keys, one per MIGRATE, 100 ms apart) in ${doneAt - startedAt} ms under load: ` +
          `${records.length} calls, ${failed.length} failed (${[...new Set(failed.map((record) => record.error))].join(' | ')}), slowest during the move ${slowest} ms; ` +
          `admitted ${keys.map((key) => admitted.get(key)).join('/')}, recorded ${stored.join('/')}`,
      );
      expect(moved).toBe(keys.length);
      expect(await slotOwner(from, slot)).toBe(to);
      expect(failed).toEqual([]);
      expect(stored).toEqual(keys.map((key) => admitted.get(key)));
      expect(Number((await cliAsync(to, 'CLUSTER', 'COUNTKEYSINSLOT', String(slot))).trim())).toBe(keys.length);
    } finally {
      await store.close();
    }
  }, 40_000);
});

describe('reconnecting', () => {
  it('backs off exponentially from 25 ms to 500 ms, with jitter, never giving up', () => {
    expect([1, 2, 3, 4, 5, 6, 10, 1_000].map((attempt) => reconnectDelay(attempt, () => 1))).toEqual([25, 50, 100, 200, 400, 500, 500, 500]);
    expect([1, 2, 5, 6, 1_000].map((attempt) => reconnectDelay(attempt, () => 0))).toEqual([13, 25, 200, 250, 250]);
    const spread = new Set(Array.from({ length: 50 }, () => reconnectDelay(20)));
    expect(spread.size).toBeGreaterThan(10);
    for (const delay of spread) expect(delay).toBeGreaterThanOrEqual(250);
  });

  it('decides again within 1 s of Redis coming back after a long outage', async () => {
    const redis = await startRedis();
    const store = redisStore({ url: redis.url });
    try {
      await store.ready();
      const limiter = createLimiter({ store, ...RAW_STORE });
      process.kill(redis.pid, 'SIGKILL');
      await expect(poll(async () => (await limiter.limit(`${run}:outage`, counting).catch(() => undefined)) === undefined ? true : undefined, 'a failure', 5_000)).resolves.toBe(true);
      await sleep(3_000); // long enough for the retries to reach the cap
      await redis.restart();
      const backAt = Date.now();
      await poll(() => limiter.limit(`${run}:outage`, counting), 'a decision after the restart', 5_000);
      const readyAfter = Date.now() - backAt;
      console.log(`[topology] Redis back after a 3 s outage: first decision ${readyAfter} ms after it answered PING`);
      expect(readyAfter).toBeLessThan(1_000);
    } finally {
      await store.close();
      await redis.stop();
    }
  }, 20_000);
});

describe('options', () => {
  const sentinels = [{ host: '127.0.0.1', port: 26_379 }];
  it.each([
    [{ sentinels }, /sentinels needs name, the primary's name .* \(e\.g\. name: 'mymaster'\), got undefined/],
    [{ sentinels, name: '' }, /sentinels needs name/],
    [{ sentinels: [], name: 'mymaster' }, /sentinels must be a non-empty list of \{ host, port \}/],
    [{ sentinels: [{ host: 'x', port: 0 }], name: 'mymaster' }, /sentinels\[0\] must be \{ host: string, port: 1\.\.65535 \}/],
    [{ url: 'redis://x:1', sentinels, name: 'mymaster' }, /give exactly one of url, client, cluster or sentinels \(got url and sentinels\)/],
    [{ url: 'redis://x:1', name: 'mymaster' }, /name goes with sentinels \(Redis Sentinel\); remove it, or give sentinels/],
    [{ url: 'redis://x:1', sentinelPassword: 'p' }, /sentinelPassword goes with sentinels/],
    [{ sentinels, name: 'mymaster', sentinelPassword: 5 }, /sentinelPassword must be a string, got 5/],
    [{ sentinels, name: 'mymaster', sentinel: true }, /unknown option "sentinel"/],
  ])('redisStore(%j) is refused', (options, message) => {
    expect(() => redisStore(options as never)).toThrow(InvalidOptionError);
    expect(() => redisStore(options as never)).toThrow(message);
  });

  it('an unreachable sentinel set is named in the error', async () => {
    const port = await freePort();
    const store: RedisStore = redisStore({ sentinels: [{ host: '127.0.0.1', port }], name: 'mymaster', connectTimeoutMs: 300 });
    try {
      expect(store.address).toBe(`sentinel mymaster via 127.0.0.1:${port}`);
      const failure = await store.ready().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as Error).message).toMatch(`Redis at sentinel mymaster via 127.0.0.1:${port} is not reachable after 300 ms`);
    } finally {
      await store.close();
    }
  });

  it('--redis-sentinel and --redis-sentinel-name (and their variables)', () => {
    expect(resolveServiceOptions({ 'redis-sentinel': '10.0.0.1:26379, 10.0.0.2:26380' }, {}).redisSentinel).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 26_379 },
        { host: '10.0.0.2', port: 26_380 },
      ],
      name: 'mymaster',
    });
    const env = { TOLLGATE_REDIS_SENTINEL: 's:26379', TOLLGATE_REDIS_SENTINEL_NAME: 'orders' };
    expect(resolveServiceOptions({ workers: '4' }, env)).toMatchObject({ workers: 4, redisSentinel: { nodes: [{ host: 's', port: 26_379 }], name: 'orders' } });
    expect(resolveServiceOptions({ 'redis-sentinel': 's:1' }, {})).not.toHaveProperty('redis');
  });

  it.each([
    [{ redis: 'redis://a:1', 'redis-sentinel': 's:1' }, {}, /give one of --redis .*, --redis-cluster .* or --redis-sentinel .*, not --redis and --redis-sentinel/],
    [{ 'redis-cluster': 'a:1', 'redis-sentinel': 's:1' }, {}, /not --redis-cluster and --redis-sentinel/],
    [{ 'redis-sentinel': 's' }, {}, /--redis-sentinel \(or TOLLGATE_REDIS_SENTINEL\) must be host:port,host:port,..., got "s"/],
    [{ 'redis-sentinel': 's:0' }, {}, /must be host:port/],
    [{ 'redis-sentinel-name': 'orders' }, {}, /--redis-sentinel-name \(or TOLLGATE_REDIS_SENTINEL_NAME\) goes with --redis-sentinel/],
    [{ 'redis-sentinel': 's:1' }, { TOLLGATE_REDIS_SENTINEL_NAME: 'my master' }, /must be the primary's name in "sentinel monitor <name> \.\.\.", without spaces/],
  ])('%j %j is refused', (flags, env, message) => {
    expect(() => resolveServiceOptions(flags, env)).toThrow(InvalidOptionError);
    expect(() => resolveServiceOptions(flags, env)).toThrow(message);
  });
});
