/**
 * Multi-region (issue 14): two regions, each deciding on its own Redis, their per-region counters
 * replicated asynchronously both ways through a link that delays every byte by 50 ms each way.
 * Real redis-servers, real replicators, a real TCP delay; decisions through createLimiter only.
 *
 * (a) one region alone answers exactly as the memory store (conformance vectors and random traces);
 * (b) the merge is idempotent and commutative, and no increment is lost or double-counted, also
 *     across a cut link;
 * (c) under load in both regions, the global admitted count per window stays within
 *     limit + the bound of docs/scaling.md ("Multi-region");
 * (d) bad input gets clear errors.
 */
import { spawn, spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  InvalidOptionError,
  InvalidPolicyError,
  createLimiter,
  memoryStore,
  regionStore,
  startReplicator,
  type Decision,
  type Limiter,
  type Policy,
  type Replicator,
  compilePolicy,
} from '../../../src/index.js';
import { readFileSync } from 'node:fs';
import { ALGORITHM_CODES, OP_CONSUME, OP_PEEK, OP_RESET, REPLAY_MAX_LAG_MS, REPLAY_SLACK_MS } from '../../../src/store/redis/protocol.js';
import { REGION_ACK_SCRIPT, REGION_DECIDE_SCRIPT, REGION_MERGE_SCRIPT, REGION_PULL_SCRIPT } from '../../../src/store/region/lua.js';
import { describeGroupVectors } from '../../support/group-vectors.js';
import { loadVectors } from '../../support/vectors.js';
import { useRegionPair } from '../../support/regions.js';

const DELAY_MS = 50;
const INTERVAL_MS = 50;
const regions = useRegionPair(DELAY_MS);
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A limiter on its own connection to `region`'s Redis: one node of that region. */
async function node(region: 'eu' | 'us'): Promise<Limiter> {
  const store = regionStore({ region, url: regions[region].url });
  await store.ready();
  return regions.track(createLimiter({ store, deadlineMs: 5_000 }));
}

/** The replicator of each region, to the other through the delaying link. */
async function startReplicators(): Promise<Replicator[]> {
  const started = [
    startReplicator({ region: 'eu', from: { url: regions.eu.url }, to: [{ region: 'us', url: regions.euToUs.url }], intervalMs: INTERVAL_MS }),
    startReplicator({ region: 'us', from: { url: regions.us.url }, to: [{ region: 'eu', url: regions.usToEu.url }], intervalMs: INTERVAL_MS }),
  ].map((replicator) => regions.track(replicator));
  await Promise.all(started.map((replicator) => replicator.ready()));
  return started;
}

/** Waits until `check` holds (polling every 20 ms), failing after `timeoutMs`. */
async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('multi-region: the scripts', () => {
  it('name the wire numbers TypeScript sends, and are pinned by SHA1 (SCRIPT LOAD agrees); a lost script is sent again', async () => {
    const source = readFileSync(new URL('../../../src/store/region/scripts/decide.lua', import.meta.url), 'utf8');
    const constants = [...source.matchAll(/^local ([A-Z_, ]+) = ([\d, ]+)$/gm)].flatMap((match) => {
      const values = match[2]!.split(/, */).map(Number);
      return match[1]!.split(/, */).map((name, i) => [name, values[i]] as const);
    });
    expect(Object.fromEntries(constants)).toEqual({
      FIXED_WINDOW: ALGORITHM_CODES['fixed-window'],
      SLIDING_WINDOW: ALGORITHM_CODES['sliding-window'],
      OP_CONSUME,
      OP_PEEK,
      OP_RESET,
      MAX_INTEGER: Number.MAX_SAFE_INTEGER,
      MAX_REPLAY_LAG: REPLAY_MAX_LAG_MS,
      REPLAY_SLACK: REPLAY_SLACK_MS,
    });
    const pinned = { decide: '27f5e8f2c7e07eb7250c42ca6db4cf9793f8af54', pull: 'e60cd7eb4791c0d6ddfa1ec4e8dc6784f47436bb', merge: '105299bae510b66dc39d40e5cf9effe2b6ae6207', ack: '89a0c5fca4a3077ea678d8c8e45d88ccdf6ec566' };
    const scripts = { decide: REGION_DECIDE_SCRIPT, pull: REGION_PULL_SCRIPT, merge: REGION_MERGE_SCRIPT, ack: REGION_ACK_SCRIPT };
    for (const [name, script] of Object.entries(scripts)) {
      expect(script.sha1, name).toBe(pinned[name as keyof typeof pinned]);
      expect(regions.eu.cli('SCRIPT', 'LOAD', script.source).trim(), name).toBe(script.sha1);
    }
    const eu = await node('eu');
    regions.eu.cli('SCRIPT', 'FLUSH');
    expect((await eu.limit(unique('flushed'), { algorithm: 'fixed-window', limit: 3, window: '1m' })).remaining).toBe(2);
  });
});

// Limits decided together, one state named twice: counted once, as on every store.
describeGroupVectors(
  'one region',
  async () => {
    const store = regionStore({ region: 'eu', url: regions.eu.url });
    await store.ready();
    return store;
  },
  ['fixed-window', 'sliding-window'],
);

describe('multi-region: one region alone decides as the memory store', () => {
  const cases = loadVectors()
    .filter(({ file }) => file === 'fixed-window.json' || file === 'sliding-window.json')
    .flatMap(({ file, vectors }) => vectors.cases.filter((c) => c.policy.windowStart !== 'first-hit').map((c) => ({ file, ...c })));

  it(`passes the ${cases.length} fixed-window and sliding-window conformance vectors (aligned windows) with the memory store's answers`, async () => {
    const region = await node('eu');
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    for (const vector of cases) {
      const key = unique('vector');
      for (const [index, step] of vector.steps.entries()) {
        const where = `${vector.file}: ${vector.name}: step ${index}`;
        if (step.op === 'reset') {
          await region.reset(key, vector.policy);
          await memory.reset(key, vector.policy);
          continue;
        }
        const options = { now: step.now, cost: step.cost ?? 1 };
        const decide = (limiter: Limiter): Promise<Decision> => (step.op === 'peek' ? limiter.peek(key, vector.policy, options) : limiter.limit(key, vector.policy, options));
        const [fromRegion, fromMemory] = [await decide(region), await decide(memory)];
        expect(fromRegion, where).toEqual(fromMemory);
        for (const [field, value] of Object.entries(step.expect ?? {})) expect(fromRegion[field as keyof Decision], `${where}: ${field}`).toEqual(value);
      }
    }
    await memory.close();
  });

  it.each([
    { algorithm: 'fixed-window', limit: 7, window: 1_000 },
    { algorithm: 'fixed-window', limit: 7, window: 1_000, countRejected: true, softPercent: 30 },
    { algorithm: 'sliding-window', limit: 7, window: 1_000 },
    { algorithm: 'sliding-window', limit: 20, window: 350, softPercent: 10 },
  ] as Policy[])('random trace with costs 1–3, peeks, looks and two-limit calls: %o', async (policy) => {
    const region = await node('eu');
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const other: Policy = { algorithm: 'fixed-window', limit: 12, window: 2_000 };
    let seed = 11;
    const random = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const key = unique('trace');
    let now = 1_700_000_000_123;
    for (let i = 0; i < 400; i++) {
      now += Math.floor(random() * 60);
      const cost = 1 + Math.floor(random() * 3);
      const pick = random();
      const run = (limiter: Limiter): Promise<unknown> =>
        pick < 0.1 ? limiter.peek(key, policy, { now, cost })
          : pick < 0.15 ? limiter.look(key, policy, { now })
            : pick < 0.3 ? limiter.limitAll([{ key, policy, cost }, { key: `${key}:b`, policy: other, cost }], { now })
              : limiter.limit(key, policy, { now, cost });
      expect(await run(region), `step ${i}`).toEqual(await run(memory));
    }
    await memory.close();
  });
});

/** The replicators shared by the tests below (restarted by the replay test). */
let running: Replicator[] = [];
async function replicating(): Promise<Replicator[]> {
  if (running.length === 0) running = await startReplicators();
  return running;
}

/** What `limiter` sees used of `key` under `policy` (limit − remaining; the limit is set high enough never to clamp). */
async function used(limiter: Limiter, key: string, policy: Policy, now?: number): Promise<number> {
  const decision = await limiter.look(key, policy, now === undefined ? {} : { now });
  return decision.limit - decision.remaining;
}

describe('multi-region: the merge is a G-counter (idempotent, commutative, nothing lost or counted twice)', () => {
  const big: Policy = { algorithm: 'fixed-window', limit: 100_000, window: '1h' };
  const now = 1_800_000_000_000;

  it('max-merging snapshots in any order, any number of times, gives the same counters', async () => {
    const store = regionStore({ region: 'us', url: regions.us.url });
    const us = regions.track(createLimiter({ store, deadlineMs: 5_000 }));
    await store.ready();
    const raw = new Redis(regions.us.url);
    regions.track({ close: async () => void (await raw.quit()) });
    const index = Math.floor(now / 3_600_000);
    const older = { [`eu:${index}`]: 3, [`ap:${index}`]: 4 };
    const newer = { [`eu:${index}`]: 7 };
    const merge = (hash: string, fields: Record<string, number>): Promise<unknown> =>
      raw.eval(REGION_MERGE_SCRIPT.source, 1, hash, 3_600_000, Object.keys(fields).length, ...Object.entries(fields).flat());
    const [inOrder, reversed, replayed] = [unique('in-order'), unique('reversed'), unique('replayed')];
    const hash = (key: string): string => store.hashKey(key, compilePolicy(big));
    await merge(hash(inOrder), older);
    await merge(hash(inOrder), newer);
    await merge(hash(reversed), newer);
    await merge(hash(reversed), older);
    for (let i = 0; i < 3; i++) for (const fields of [newer, older]) await merge(hash(replayed), fields);
    const expected = { [`eu:${index}`]: '7', [`ap:${index}`]: '4' };
    for (const key of [inOrder, reversed, replayed]) {
      expect(await raw.hgetall(hash(key))).toEqual(expected);
      expect(await used(us, key, big, now)).toBe(11);
    }
  });

  it('after replication quiesces each region counts every admitted request of both regions once; a replay changes nothing', async () => {
    const [eu1, eu2, us1] = [await node('eu'), await node('eu'), await node('us')];
    await replicating();
    const key = unique('quiesce');
    const sent = [];
    for (let i = 0; i < 30; i++) sent.push((i % 2 === 0 ? eu1 : eu2).limit(key, big, { now: now + i, cost: 1 + (i % 3) }));
    for (let i = 0; i < 20; i++) sent.push(us1.limit(key, big, { now: now + i, cost: 2 }));
    const admitted = (await Promise.all(sent)).filter((decision) => decision.allowed).length;
    expect(admitted).toBe(50);
    const total = 10 * (1 + 2 + 3) + 20 * 2;
    await eventually(async () => (await used(eu1, key, big, now)) === total && (await used(us1, key, big, now)) === total, `both regions at ${total}`);
    // Replay: log every change again, forget what the peers acknowledged, and replicate afresh.
    await Promise.all(running.map((replicator) => replicator.close()));
    running = [];
    for (const [name, server] of [['eu', regions.eu], ['us', regions.us]] as const) {
      const hashKey = `tollgate:{${key}}:fw:1h`;
      server.cli('ZADD', `tollgate:region-changes:${name}`, '1', hashKey);
      server.cli('DEL', `tollgate:region-cursors:${name}`);
    }
    const replayed = await replicating();
    await eventually(async () => replayed.every((replicator) => replicator.stats().peers[0]!.keysReplicated > 0), 'the replay to be applied');
    await sleep(4 * INTERVAL_MS + 2 * DELAY_MS);
    expect(await used(eu1, key, big, now)).toBe(total);
    expect(await used(us1, key, big, now)).toBe(total);
    const raised = replayed.map((replicator) => replicator.stats().peers[0]!.fieldsRaised);
    console.log(`[multi-region] replay: ${replayed.map((r) => r.stats().peers[0]!.keysReplicated).join(' + ')} hashes sent again, fields raised ${raised.join(' + ')}; both regions still at ${total}`);
    expect(raised).toEqual([0, 0]);
  });

  it('a backlog bigger than a batch goes out in pipelined batches, and the change log is trimmed behind the peer', async () => {
    const store = regionStore({ region: 'eu', url: regions.eu.url, keyPrefix: 'backlog:' });
    const peerStore = regionStore({ region: 'us', url: regions.us.url, keyPrefix: 'backlog:' });
    // A long deadline: under load the default 50 ms would let the local fallback answer (0 used).
    const [eu, us] = [regions.track(createLimiter({ store, deadlineMs: 5_000 })), regions.track(createLimiter({ store: peerStore, deadlineMs: 5_000 }))];
    await Promise.all([store.ready(), peerStore.ready()]);
    const keys = Array.from({ length: 300 }, (_, i) => `${unique('backlog')}-${i}`);
    await Promise.all(keys.map((key) => eu.limit(key, big, { now, cost: 2 })));
    const replicator = regions.track(startReplicator({ region: 'eu', from: { url: regions.eu.url }, to: [{ region: 'us', url: regions.euToUs.url }], keyPrefix: 'backlog:', batchSize: 16, maxInFlight: 4 }));
    await replicator.ready();
    const started = Date.now();
    await eventually(async () => replicator.stats().peers[0]!.keysReplicated >= 300 && replicator.stats().peers[0]!.pending === 0, 'the backlog to be sent');
    const elapsed = Date.now() - started;
    for (const key of keys) expect(await used(us, key, big, now)).toBe(2);
    await eventually(async () => regions.eu.cli('ZCARD', 'backlog:region-changes:eu').trim() === '0', 'the change log to be trimmed');
    console.log(`[multi-region] backlog: 300 changed hashes in batches of 16 (4 in flight) over the 50 ms link reached the peer in ${elapsed} ms; change log trimmed to 0`);
  });

  it('with the link cut each region decides on what it knows; on reconnect nothing is lost', async () => {
    const [eu, us] = [await node('eu'), await node('us')];
    const replicatorsNow = await replicating();
    const key = unique('cut');
    await eu.limit(key, big, { now, cost: 5 });
    await eventually(async () => (await used(us, key, big, now)) === 5, 'us to see eu\'s first 5');
    regions.euToUs.cut();
    regions.usToEu.cut();
    for (let i = 0; i < 40; i++) await eu.limit(key, big, { now });
    for (let i = 0; i < 25; i++) await us.limit(key, big, { now });
    await sleep(3 * INTERVAL_MS + 2 * DELAY_MS);
    expect(await used(eu, key, big, now)).toBe(45);
    expect(await used(us, key, big, now)).toBe(30);
    expect(replicatorsNow.map((replicator) => replicator.stats().peers[0]!.lastError)).not.toContain(undefined);
    regions.euToUs.restore();
    regions.usToEu.restore();
    const started = Date.now();
    await eventually(async () => (await used(eu, key, big, now)) === 70 && (await used(us, key, big, now)) === 70, 'both regions at 70 after the link is back', 10_000);
    console.log(`[multi-region] link cut: eu counted 45, us 30 on their own; ${Date.now() - started} ms after the link came back both saw 70`);
    // Each region alone stops at the limit: with the link down both together admit up to 2 × limit.
    const small: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
    regions.euToUs.cut();
    regions.usToEu.cut();
    let admitted = 0;
    for (let i = 0; i < 15; i++) for (const limiter of [eu, us]) if ((await limiter.limit(`${key}:small`, small, { now })).allowed) admitted += 1;
    regions.euToUs.restore();
    regions.usToEu.restore();
    expect(admitted).toBe(20);
  });
});

/** Requests every `TICK_MS` from each node, for `LOAD_MS`: 2 nodes a region, 200 requests/s offered per region. */
const TICK_MS = 10;
const LOAD_MS = 2_500;
const LIMIT = 100;
/**
 * D of docs/scaling.md: how late a region can see the other's count. A change waits up to one
 * interval to be read, then travels the one-way delay; APPLY_MS allows for reading, merging and the
 * event loops of this one machine (both regions, both replicators and the load share its CPUs).
 */
const APPLY_MS = 25;
const STALENESS_MS = INTERVAL_MS + DELAY_MS + APPLY_MS;

describe('multi-region: under load with a 50 ms link, the global count per window stays within the bound', () => {
  it.each(['fixed-window', 'sliding-window'] as const)('%s, limit 100 per second, 200 requests/s offered in each region', async (algorithm) => {
    const nodes = { eu: [await node('eu'), await node('eu')], us: [await node('us'), await node('us')] };
    // Fresh replicators, so their stats (longest lag, longest gap between reads) are this run's.
    await Promise.all(running.map((replicator) => replicator.close()));
    running = [];
    const replicatorsNow = await replicating();
    const policy: Policy = { algorithm, limit: LIMIT, window: '1s' };
    const key = unique('load');
    // Start just after a window begins, so the run covers two whole windows.
    await sleep(1_000 - (Date.now() % 1_000) + 5);
    const pending: { region: 'eu' | 'us'; decision: Promise<Decision> }[] = [];
    const started = Date.now();
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        if (Date.now() - started >= LOAD_MS) {
          clearInterval(timer);
          resolve();
          return;
        }
        for (const region of ['eu', 'us'] as const) for (const limiter of nodes[region]) pending.push({ region, decision: limiter.limit(key, policy) });
      }, TICK_MS);
    });
    const elapsed = Date.now() - started;
    const decisions = await Promise.all(pending.map(async ({ region, decision }) => ({ region, decision: await decision })));
    const perWindow = new Map<number, { eu: number; us: number }>();
    for (const { region, decision } of decisions) {
      if (!decision.allowed) continue;
      const window = Math.floor(decision.now / 1_000);
      const counts = perWindow.get(window) ?? { eu: 0, us: 0 };
      counts[region] += 1;
      perWindow.set(window, counts);
    }
    const offeredPerSecond = Math.max(...(['eu', 'us'] as const).map((region) => (decisions.filter((d) => d.region === region).length / elapsed) * 1_000));
    // Over-admission ≤ what the other region offers (and so can admit) within D, and never more than (R − 1) × limit.
    const boundFor = (stalenessMs: number): number => Math.min(Math.ceil((offeredPerSecond * stalenessMs) / 1_000), LIMIT);
    const bound = boundFor(STALENESS_MS);
    // The D this run actually had, from the replicators: the longest gap between reads plus the longest read-to-acknowledgement
    // (an upper bound of read-to-applied). On a machine busy enough to stretch D past the nominal one, the bound stretches with it.
    const peers = replicatorsNow.map((replicator) => replicator.stats().peers[0]!);
    const measuredStalenessMs = Math.max(...peers.map((peer) => (peer.maxReadGapMs ?? INTERVAL_MS) + (peer.maxLagMs ?? 0)));
    const rows = [...perWindow.entries()].sort(([a], [b]) => a - b);
    const over = rows.map(([, counts]) => counts.eu + counts.us - LIMIT);
    console.log(
      `[multi-region] ${algorithm}: limit ${LIMIT}/s, ${decisions.length} requests in ${elapsed} ms (${Math.round(offeredPerSecond)}/s offered per region), link ${DELAY_MS} ms each way, interval ${INTERVAL_MS} ms; ` +
        `admitted per window ${rows.map(([, c]) => `${c.eu}+${c.us}=${c.eu + c.us}`).join(', ')}; over the limit by ${over.join(', ')} (max ${Math.max(...over)}) vs bound ${bound} (D = ${STALENESS_MS} ms); ` +
        `replicators: longest read gap ${peers.map((peer) => peer.maxReadGapMs).join(' / ')} ms, longest read-to-ack ${peers.map((peer) => peer.maxLagMs).join(' / ')} ms (measured D ≤ ${measuredStalenessMs} ms, bound ${boundFor(measuredStalenessMs)})`,
    );
    const allowed = Math.max(bound, boundFor(measuredStalenessMs));
    for (const [window, counts] of rows) expect(counts.eu + counts.us, `window ${window}`).toBeLessThanOrEqual(LIMIT + allowed);
    // The two whole windows (not the run's last, partial one) reach the limit: regions do not under-admit either
    // (a sliding window may stop a few short: its estimate rounds the previous window's weight down to 0 only in its last ms;
    // and what the window before admitted over the limit, E, weighs E × (1 − f) at a fraction f of this one, so it may
    // stop E more short: a loaded machine that stretched D over-admits one window and under-admits the next by as much).
    rows.slice(0, 2).forEach(([window, counts], i) => {
      const carried = i === 0 ? 0 : Math.max(0, over[i - 1]!);
      expect(counts.eu + counts.us, `window ${window}`).toBeGreaterThanOrEqual(algorithm === 'fixed-window' ? LIMIT : LIMIT - 5 - carried);
    });
  });
});

describe('multi-region: bad input', () => {
  it('refuses algorithms whose state is not a sum of per-region counts, naming what is supported and why', async () => {
    const eu = await node('eu');
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'gcra'] as const) {
      await expect(eu.limit('k', { algorithm, limit: 5, window: '1s' })).rejects.toThrow(InvalidPolicyError);
      await expect(eu.limit('k', { algorithm, limit: 5, window: '1s' })).rejects.toThrow(
        new RegExp(`regionStore supports fixed-window \\(aligned windows\\) and sliding-window, got ${algorithm}: a bucket's level`),
      );
    }
    await expect(eu.limit('k', { algorithm: 'sliding-log', limit: 5, window: '1s' })).rejects.toThrow(/got sliding-log: a log of timestamps is not a sum/);
    await expect(eu.limit('k', { algorithm: 'fixed-window', limit: 5, window: '1s', windowStart: 'first-hit' })).rejects.toThrow(/use windowStart: 'aligned'/);
    await expect(eu.limit('k', { algorithm: 'fixed-window', limit: 5, window: 'month', timeZone: 'Europe/Paris' })).rejects.toThrow(/regionStore does not take calendar windows \('month'\)/);
    await expect(eu.limit('k', { algorithm: 'sliding-window', limit: 5, window: '1s', precision: 10 })).rejects.toThrow(/of precision 1: its per-region counters are two windows, not 10 buckets; remove precision/);
    await expect(eu.limitAll([{ key: 'a', policy: { algorithm: 'fixed-window', limit: 5, window: '1s' } }, { key: 'b', policy: { algorithm: 'gcra', limit: 5, window: '1s' } }])).rejects.toThrow(InvalidPolicyError);
  });

  it('refuses a bad region name, a missing or second Redis, a Cluster, an unknown option', () => {
    const url = regions.eu.url;
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ region: 'e u', url }, /regionStore: region must be a name of 1–32 letters, digits, _ or - .*got "e u"/],
      [{ region: 'eu:1', url }, /region must be a name/],
      [{ url }, /region must be a name .*got undefined/],
      [{ region: 'eu' }, /regionStore: give exactly one of url or client \(got none\)/],
      [{ region: 'eu', url, client: new Redis({ lazyConnect: true }) }, /exactly one of url or client \(got url and client\)/],
      [{ region: 'eu', cluster: [{ host: '127.0.0.1', port: 7000 }] }, /each region is one Redis server .*a Redis Cluster per region is not supported/],
      [{ region: 'eu', url: 'localhost:6379' }, /url must look like redis:\/\/host:port/],
      [{ region: 'eu', url, colour: 'blue' }, /regionStore: unknown option "colour"/],
      [{ region: 'eu', url, keyPrefix: 'a{b}' }, /keyPrefix must be a string without \{ or \}/],
    ];
    for (const [options, message] of cases) {
      expect(() => regionStore(options as never)).toThrow(InvalidOptionError);
      expect(() => regionStore(options as never)).toThrow(message);
    }
  });

  it('refuses bad replicator options', () => {
    const from = { url: regions.eu.url };
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ region: 'eu', from, to: [] }, /startReplicator: to must be a non-empty list of peer regions/],
      [{ region: 'eu', from, to: [{ region: 'eu', url: regions.us.url }] }, /to\[0\] names region "eu" which is this replicator's own region/],
      [{ region: 'eu', from, to: [{ region: 'us', url: regions.us.url }, { region: 'us', url: regions.us.url }] }, /to\[1\] names region "us" twice/],
      [{ region: 'eu', from, to: [{ region: 'us', url: regions.us.url }], intervalMs: 0 }, /intervalMs must be a whole number ≥ 1, got 0/],
      [{ region: 'eu', from: {}, to: [{ region: 'us', url: regions.us.url }] }, /startReplicator: from: give exactly one of url or client/],
      [{ region: 'eu', from, to: [{ region: 'us' }] }, /to \(us\): give exactly one of url or client/],
    ];
    for (const [options, message] of cases) expect(() => startReplicator(options as never)).toThrow(message);
  });

  const cli = new URL('../../../dist/cli/main.js', import.meta.url).pathname;
  it.each([
    [[], /replicate: --region NAME is required/],
    [['--region', 'e u', '--redis', 'redis://127.0.0.1:1', '--peer', 'us=redis://127.0.0.1:2'], /replicate: --region: region must be a name/],
    [['--region', 'eu', '--peer', 'us=redis://127.0.0.1:2'], /--redis must be the region's own Redis as redis:\/\/host:port, got nothing/],
    [['--region', 'eu', '--redis', 'redis://127.0.0.1:1'], /give at least one --peer REGION=redis:\/\/host:port/],
    [['--region', 'eu', '--redis', 'redis://127.0.0.1:1', '--peer', 'us'], /--peer must be REGION=redis:\/\/host:port .*got "us"/],
    [['--region', 'eu', '--redis', 'redis://127.0.0.1:1', '--peer', 'eu=redis://127.0.0.1:2'], /--peer eu=redis:\/\/127.0.0.1:2 names this replicator's own region/],
    [['--region', 'eu', '--redis', 'redis://127.0.0.1:1', '--peer', 'us=redis://127.0.0.1:2', '--interval-ms', '0'], /--interval-ms must be a whole number of ms from 1 to 60000, got "0"/],
    [['--region', 'eu', '--redis', 'redis://127.0.0.1:1', '--peer', 'us=redis://127.0.0.1:2', '--colour', 'blue'], /^tollgate replicate: unknown flag --colour\nsee tollgate replicate --help\n$/],
  ])('tollgate replicate %j: exit 2 with a clear message', (args, message) => {
    const result = spawnSync(process.execPath, [cli, 'replicate', ...(args as string[])], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(message as RegExp);
  });

  it('tollgate replicate carries a region\'s counts to its peer, and stops on SIGTERM', async () => {
    const us = await node('us');
    const child = spawn(process.execPath, [cli, 'replicate', '--region', 'eu', '--redis', regions.eu.url, '--peer', `us=${regions.euToUs.url}`, '--interval-ms', '20', '--key-prefix', 'cli:'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const policy: Policy = { algorithm: 'sliding-window', limit: 1_000, window: '1m' };
      const euStore = regionStore({ region: 'eu', url: regions.eu.url, keyPrefix: 'cli:' });
      const usStore = regionStore({ region: 'us', url: regions.us.url, keyPrefix: 'cli:' });
      const [euCli, usCli] = [regions.track(createLimiter({ store: euStore, deadlineMs: 5_000 })), regions.track(createLimiter({ store: usStore, deadlineMs: 5_000 }))];
      await Promise.all([euStore.ready(), usStore.ready()]);
      const key = unique('cli');
      for (let i = 0; i < 12; i++) await euCli.limit(key, policy);
      await eventually(async () => (await used(usCli, key, policy)) === 12, 'us to see eu\'s 12 through the CLI replicator');
      expect(await used(us, key, policy)).toBe(0); // another key prefix: the default stores see nothing
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });
});
