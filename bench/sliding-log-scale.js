// The sliding log at large limits (issue 31 item 3): one hot key, a one-hour window, limits 100,
// 10k, 50k and 100k, side by side with Tollgate's fixed window (first-hit, so no window boundary
// falls inside a sample) and rate-limiter-flexible's fixed-window limiters (RateLimiterRedis with
// ioredis, RateLimiterMemory): rate-limiter-flexible 11.4 has no sliding log, nor any rolling-window
// limiter, so its fixed window is the nearest peer. Redis and the memory store.
//
//   npm run build && node bench/sliding-log-scale.js [--rounds 3] [--limits 100,10000,50000,100000] [--calls 20000] [--in-flight 64]
//
// A sample, per key (as many keys one after the other as it takes to make --calls admitted calls):
// the key is first brought to `limit − admitted` (untimed: a sliding log gets that many entries at
// distinct milliseconds over the past 30 minutes, written straight into its Redis LIST in the
// store's layout, or logged with an explicit `now` on the memory store; a fixed window gets one
// call of that cost), then `admitted` calls of cost 1 (all admitted, checked: the log grows to the
// limit), then --calls denied calls spread over the keys (checked). Redis: --in-flight concurrent
// callers (Tollgate batches them); memory: sequential `limit` calls. Subjects alternate, the order
// reversed every round. Redis CPU per call is `INFO cpu` over the timed phases ÷ calls.
// Then bytes per entry: memory store heap delta (after GC) ÷ entries, Redis MEMORY USAGE of a
// full log ÷ its entries (and of the same entries in a sorted set, the design's other layout).
// --rounds 0 measures the bytes alone.
// Writes bench/results/sliding-log-scale.json.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { stopChild } from './support/children.js';
import { redisCli, removeRedisDirs, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT = dirname(dirname(SCRIPT));
if (typeof globalThis.gc !== 'function') {
  const run = spawnSync(process.execPath, ['--expose-gc', SCRIPT, ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
const require = createRequire(import.meta.url);
const { Redis } = require('ioredis');
const { RateLimiterRedis, RateLimiterMemory } = require('rate-limiter-flexible');
const tollgate = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);

const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
const ROUNDS = Number(option('rounds', '3'));
const LIMITS = option('limits', '100,10000,50000,100000').split(',').map(Number);
const CALLS = Number(option('calls', '20000'));
const IN_FLIGHT = Number(option('in-flight', '64'));
const HOUR = 3_600_000;

const server = await startRedisServer('sliding-log-scale');
const client = new Redis(server.url, { enableAutoPipelining: false });
const redisStore = tollgate.redisStore({ url: server.url });
await redisStore.ready();
const onRedis = tollgate.createLimiter({ store: redisStore, deadlineMs: 30_000 });
let sequence = 0;
const freshKey = (name) => `${name}:${process.pid}:${++sequence}`;

/** The Redis key of `key`'s sliding log under `policy`: learnt from a probe's key. */
async function logKeyOf(key, policy) {
  const probe = freshKey('probe');
  await onRedis.limit(probe, policy);
  const [stateKey] = await client.keys(`*${probe}*`);
  await client.del(stateKey);
  return stateKey.replace(probe, key);
}

/** `count` log entries "time cumulative weight" at distinct ms over the 30 minutes before `end`. */
function pastEntries(count, end) {
  const step = Math.max(1, Math.floor(1_800_000 / Math.max(1, count)));
  return Array.from({ length: count }, (_, i) => [end - 1_800_000 + i * step, i + 1]);
}

const slidingLog = (limit) => ({ algorithm: 'sliding-log', limit, window: HOUR });
const fixedWindow = (limit) => ({ algorithm: 'fixed-window', limit, window: HOUR, windowStart: 'first-hit' });

/** Subjects: prepare(key, count) brings the key to `count` admitted; call(key) → admitted? */
function subjects(limit) {
  const rlfRedis = new RateLimiterRedis({ storeClient: client, points: limit, duration: 3600, keyPrefix: `rlf${limit}` });
  const rlfMemory = new RateLimiterMemory({ points: limit, duration: 3600 });
  const rlfCall = (limiter) => (key) => limiter.consume(key).then(() => true, (result) => {
    if (result instanceof Error) throw result;
    return false;
  });
  const memory = () => tollgate.createLimiter({ store: tollgate.memoryStore({ sweepIntervalMs: 0 }) });
  return {
    redis: {
      'tollgate sliding-log': {
        async prepare(key, count) {
          if (count === 0) return;
          const listKey = await logKeyOf(key, slidingLog(limit));
          const entries = pastEntries(count, Date.now()).map(([t, c]) => `${t} ${c} 1`);
          for (let i = 0; i < entries.length; i += 10_000) await client.rpush(listKey, ...entries.slice(i, i + 10_000));
          await client.pexpire(listKey, HOUR);
        },
        call: async (key) => (await onRedis.limit(key, slidingLog(limit))).allowed,
      },
      'tollgate fixed-window': {
        prepare: async (key, count) => count > 0 && void (await onRedis.limit(key, fixedWindow(limit), { cost: count })),
        call: async (key) => (await onRedis.limit(key, fixedWindow(limit))).allowed,
      },
      'rlf RateLimiterRedis (fixed window)': {
        prepare: async (key, count) => count > 0 && void (await rlfRedis.consume(key, count)),
        call: rlfCall(rlfRedis),
      },
    },
    memory: {
      'tollgate sliding-log': (() => {
        const limiter = memory();
        return {
          async prepare(key, count) {
            for (const [t] of pastEntries(count, Date.now())) await limiter.limit(key, slidingLog(limit), { now: t });
          },
          call: async (key) => (await limiter.limit(key, slidingLog(limit))).allowed,
        };
      })(),
      'tollgate fixed-window': (() => {
        const limiter = memory();
        return {
          prepare: async (key, count) => count > 0 && void (await limiter.limit(key, fixedWindow(limit), { cost: count })),
          call: async (key) => (await limiter.limit(key, fixedWindow(limit))).allowed,
        };
      })(),
      'rlf RateLimiterMemory (fixed window)': {
        prepare: async (key, count) => count > 0 && void (await rlfMemory.consume(key, count)),
        call: rlfCall(rlfMemory),
      },
    },
  };
}

/** Runs `count` calls with `inFlight` concurrent callers; returns [ms, admitted]. */
async function timed(call, key, count, inFlight) {
  let issued = 0;
  let admitted = 0;
  const started = performance.now();
  const worker = async () => {
    while (issued < count) {
      issued += 1;
      if (await call(key)) admitted += 1;
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, worker));
  return [performance.now() - started, admitted];
}

function redisCpuSeconds() {
  const text = redisCli(server.port, 'INFO', 'cpu');
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0);
  return field('used_cpu_sys') + field('used_cpu_user');
}

async function sample(storeName, subject, limit) {
  const keys = Math.max(1, Math.ceil(CALLS / limit));
  const admittedPerKey = Math.min(limit, CALLS);
  const deniedPerKey = Math.ceil(CALLS / keys);
  const inFlight = storeName === 'redis' ? IN_FLIGHT : 1;
  let admittedMs = 0;
  let deniedMs = 0;
  let cpu = 0;
  for (let k = 0; k < keys; k++) {
    const key = freshKey(`hot${limit}`);
    await subject.prepare(key, limit - admittedPerKey);
    const cpuBefore = storeName === 'redis' ? redisCpuSeconds() : 0;
    const [ms, admitted] = await timed(subject.call, key, admittedPerKey, inFlight);
    const [msDenied, wronglyAdmitted] = await timed(subject.call, key, deniedPerKey, inFlight);
    if (storeName === 'redis') cpu += redisCpuSeconds() - cpuBefore;
    if (admitted !== admittedPerKey || wronglyAdmitted !== 0) {
      throw new Error(`${storeName} ${limit}: admitted ${admitted} of ${admittedPerKey}, then ${wronglyAdmitted} of ${deniedPerKey} past the limit`);
    }
    admittedMs += ms;
    deniedMs += msDenied;
  }
  const admittedCalls = keys * admittedPerKey;
  const deniedCalls = keys * deniedPerKey;
  return {
    admittedPerSecond: (admittedCalls / admittedMs) * 1000,
    deniedPerSecond: (deniedCalls / deniedMs) * 1000,
    perSecond: ((admittedCalls + deniedCalls) / (admittedMs + deniedMs)) * 1000,
    redisMicrosPerCall: storeName === 'redis' ? (cpu * 1e6) / (admittedCalls + deniedCalls) : undefined,
  };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

const samples = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const limit of LIMITS) {
    const bySubject = subjects(limit);
    for (const storeName of ['redis', 'memory']) {
      const names = Object.keys(bySubject[storeName]);
      for (const name of round % 2 === 0 ? names : names.reverse()) {
        const result = await sample(storeName, bySubject[storeName][name], limit);
        ((samples[`${storeName}|${limit}`] ??= {})[name] ??= []).push(result);
        console.error(`round ${round + 1} ${storeName} ${limit} ${name}: ${result.perSecond.toFixed(0)}/s (admitted ${result.admittedPerSecond.toFixed(0)}/s, denied ${result.deniedPerSecond.toFixed(0)}/s)`);
      }
    }
  }
}

/** Bytes per entry of a full log of `limit` entries: memory store heap, Redis LIST, the same entries as a sorted set. */
async function bytesPerEntry(limit) {
  const entries = pastEntries(limit, Date.now());
  // The memory store first, on a quiet heap; enough keys for 200,000 entries in all, so a small
  // limit's figure is not lost in the noise (the per-key overhead is in it).
  const limiter = tollgate.createLimiter({ store: tollgate.memoryStore({ sweepIntervalMs: 0 }) });
  await limiter.limit('warm', slidingLog(limit), { now: entries[0][0] });
  const keys = Math.ceil(200_000 / limit);
  globalThis.gc();
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  for (let k = 0; k < keys; k++) for (const [t] of entries) await limiter.limit(`m${k}`, slidingLog(limit), { now: t });
  globalThis.gc();
  globalThis.gc();
  const heap = (process.memoryUsage().heapUsed - before) / (keys * limit);
  const full = await limiter.peek(`m${keys - 1}`, slidingLog(limit));
  if (full.remaining !== 0) throw new Error(`the memory store's log of ${limit} is not full`);
  await limiter.close();
  const key = freshKey(`bytes${limit}`);
  const listKey = await logKeyOf(key, slidingLog(limit));
  for (let i = 0; i < limit; i += 10_000) await client.rpush(listKey, ...entries.slice(i, i + 10_000).map(([t, c]) => `${t} ${c} 1`));
  // The decision confirms the script reads this log as its own (denied: full).
  const decision = await onRedis.limit(key, slidingLog(limit));
  if (decision.allowed || decision.remaining !== 0) throw new Error(`a full log of ${limit} was not read as full`);
  const list = Number(await client.call('MEMORY', 'USAGE', listKey, 'SAMPLES', '0')) / limit;
  const zsetKey = `${listKey}:as-zset`;
  for (let i = 0; i < limit; i += 10_000) await client.zadd(zsetKey, ...entries.slice(i, i + 10_000).flatMap(([t, c]) => [t, `${c} 1`]));
  const zset = Number(await client.call('MEMORY', 'USAGE', zsetKey, 'SAMPLES', '0')) / limit;
  return { redisList: list, redisSortedSet: zset, memoryHeap: heap };
}

const bytes = {};
for (const limit of LIMITS) bytes[limit] = await bytesPerEntry(limit);

const report = { date: new Date().toISOString(), machine: `${cpus().length}× ${cpus()[0]?.model}, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`, node: process.version, redis: redisCli(server.port, 'INFO', 'server').match(/redis_version:(\S+)/)?.[1], calls: CALLS, inFlight: IN_FLIGHT, rounds: ROUNDS, medians: {}, bytes, samples };
console.log(`\n${report.machine}; Node ${report.node}; Redis ${report.redis}; ${ROUNDS} rounds; ${CALLS} calls per phase; Redis ${IN_FLIGHT} in flight, memory sequential\n`);
console.log('| store | limit | subject | calls/s (median) | admitted/s | denied/s | × Tollgate fixed window | Redis CPU µs/call |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const [where, bySubject] of Object.entries(samples)) {
  const [storeName, limit] = where.split('|');
  const fixedRuns = bySubject['tollgate fixed-window'];
  for (const [name, runs] of Object.entries(bySubject)) {
    const ratio = median(runs.map((run, i) => run.perSecond / fixedRuns[i].perSecond));
    const row = { perSecond: median(runs.map((r) => r.perSecond)), admitted: median(runs.map((r) => r.admittedPerSecond)), denied: median(runs.map((r) => r.deniedPerSecond)), ratio, redisMicros: storeName === 'redis' ? median(runs.map((r) => r.redisMicrosPerCall)) : undefined };
    (report.medians[where] ??= {})[name] = row;
    console.log(`| ${storeName} | ${limit} | ${name} | ${row.perSecond.toFixed(0)} | ${row.admitted.toFixed(0)} | ${row.denied.toFixed(0)} | ${ratio.toFixed(2)} | ${row.redisMicros?.toFixed(1) ?? ''} |`);
  }
}
console.log('\n| limit | memory store heap B/entry (per key too) | Redis LIST B/entry | same entries as a sorted set B/entry |\n| --- | --- | --- | --- |');
for (const [limit, b] of Object.entries(bytes)) console.log(`| ${limit} | ${b.memoryHeap.toFixed(1)} | ${b.redisList.toFixed(1)} | ${b.redisSortedSet.toFixed(1)} |`);

mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(join(ROOT, 'bench', 'results', 'sliding-log-scale.json'), `${JSON.stringify(report, null, 2)}\n`);
client.disconnect();
await onRedis.close();
await stopChild(server.child);
removeRedisDirs();
