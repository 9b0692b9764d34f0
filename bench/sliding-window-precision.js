// How far sliding-window's estimate strays from the exact sliding log, at precision 1, 4, 10 and
// 60 (issue 16 item 6), and what each costs per key in memory and in Redis.
//
//   npm run build && flock /tmp/tollgate-bench.lock node --expose-gc bench/sliding-window-precision.js \
//     [--seed 16] [--clients 320] [--seconds 3150] [--trace FILE] [--memory-keys 131072] [--redis-keys 20000]
//     [--precisions 1,4,10,60] [--skip-memory]
//
// 1. A synthetic access log, deterministic for a seed (mulberry32): half the clients steady
//    (Poisson arrivals at 0.7–1.3 × the limit), half bursty (bursts of 0.3–1.5 × the limit at
//    ~10/s, then idle so that their mean rate is also 0.7–1.3 × the limit), about a million
//    requests, written as JSON lines { time (epoch ms), ip, path } (so `tollgate simulate` can
//    replay it too).
// 2. The log read back and replayed, in time order, through the public limiter with an explicit
//    `now` on the memory store, one limiter per algorithm: sliding-log (exact) and sliding-window at
//    each precision, limit 60 per minute per ip. A decision "differs" when sliding-window admits what
//    the log refuses (false allow) or refuses what it admits (false deny); each algorithm keeps its
//    own history, as it would in production. Then the estimator alone, on the log's history: each
//    precision's verdict (a peek) against the log's decision, every request the log admits being
//    recorded in the counter too (a limit under the same state with a limit nothing reaches: a
//    policy's counters do not depend on its limit), so no earlier difference carries over.
// 3. Memory per key: the memory store's heap + array buffers per key (131,072 keys, each the
//    key of a client at its limit (a full log, or a count in every bucket), in a child process per
//    precision, after gc; the least of 3), and Redis INFO used_memory per key (20,000 such keys,
//    under 60 per day so that none expires during the fill), with MEMORY USAGE of one of them.
// 4. Speed, the cost of more buckets (timed: run under the lock; quote ratios): the memory store's
//    `limitSync` on 1,000 keys with `now` 1 ms apart (median ns of 3 rounds of 1M), and Redis
//    decisions/s on Redis TIME, 64 in flight over 1,000 keys (median of 3 rounds of 20,000).
//    Writes bench/results/sliding-window-precision.json.
import { execFileSync } from 'node:child_process';
import { createReadStream, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { killAllNow, stopChild } from './support/children.js';
import { redisCli, removeRedisDirs, startRedisServer } from './support/redis.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
const SEED = Number(option('seed', 16));
const CLIENTS = Number(option('clients', 320));
const SECONDS = Number(option('seconds', 3150));
const TRACE = option('trace', join(tmpdir(), `tollgate-precision-trace-${SEED}.jsonl`));
const MEMORY_KEYS = Number(option('memory-keys', 131_072));
const REDIS_KEYS = Number(option('redis-keys', 20_000));
const PRECISIONS = option('precisions', '1,4,10,60').split(',').map(Number);
/** `--skip-memory`: the decisions only (e.g. to try other precisions). */
const SKIP_MEMORY = argv.includes('--skip-memory');
const LIMIT = 60;
const WINDOW = 60_000;
const DAY = 86_400_000;
const START = 1_700_000_000_000;
const PATHS = ['/api/orders', '/api/search', '/api/users/me', '/api/cart'];

const { createLimiter, memoryStore, redisStore } = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
const policyOf = (precision) => (precision === 0 ? { algorithm: 'sliding-log', limit: LIMIT, window: WINDOW } : { algorithm: 'sliding-window', limit: LIMIT, window: WINDOW, precision });

/** mulberry32: a small, well-mixed 32-bit PRNG; the same seed gives the same trace everywhere. */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Arrival times (ms from START) of one client over SECONDS. */
function clientTimes(next, bursty) {
  const end = SECONDS * 1000;
  const meanGap = WINDOW / LIMIT / (0.7 + 0.6 * next());
  const exponential = (mean) => -mean * Math.log(1 - next());
  const times = [];
  let t = exponential(meanGap);
  while (t < end) {
    if (!bursty) {
      times.push(t);
      t += exponential(meanGap);
      continue;
    }
    const size = Math.max(1, Math.round(LIMIT * (0.3 + 1.2 * next())));
    const burstStart = t;
    for (let i = 0; i < size && t < end; i++) {
      times.push(t);
      t += exponential(100);
    }
    // Idle until the burst's share of the mean rate is used up (at least a few seconds).
    t = Math.max(t + 2000, burstStart + exponential(size * meanGap));
  }
  return times;
}

function writeTrace() {
  const next = random(SEED);
  const events = [];
  for (let client = 0; client < CLIENTS; client++) {
    const ip = `10.0.${client >> 8}.${client & 255}`;
    for (const at of clientTimes(next, client % 2 === 1)) events.push([START + Math.floor(at), ip, PATHS[Math.floor(next() * PATHS.length)]]);
  }
  events.sort((a, b) => a[0] - b[0]);
  writeFileSync(TRACE, events.map(([time, ip, path]) => JSON.stringify({ time, ip, path })).join('\n') + '\n');
  return events.length;
}

/** Replays the trace file through one limiter per algorithm; counts decisions that differ from the log. */
async function replay() {
  const subjects = [0, ...PRECISIONS].map((precision) => ({
    precision,
    policy: policyOf(precision),
    limiter: createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) }),
    allowed: 0,
    falseAllow: 0,
    falseDeny: 0,
    /** Wrong decisions for bursty clients (odd client numbers); the rest are steady ones'. */
    wrongBursty: 0,
  }));
  const burstyRequests = { count: 0 };
  let requests = 0;
  for await (const line of createInterface({ input: createReadStream(TRACE) })) {
    if (line === '') continue;
    const { time, ip } = JSON.parse(line);
    requests += 1;
    const bursty = Number(ip.slice(ip.lastIndexOf('.') + 1)) % 2 === 1;
    if (bursty) burstyRequests.count += 1;
    let exact;
    for (const subject of subjects) {
      const { allowed } = await subject.limiter.limit(ip, subject.policy, { now: time });
      if (allowed) subject.allowed += 1;
      if (subject.precision === 0) exact = allowed;
      else if (allowed !== exact) {
        if (allowed) subject.falseAllow += 1;
        else subject.falseDeny += 1;
        if (bursty) subject.wrongBursty += 1;
      }
    }
  }
  for (const subject of subjects) await subject.limiter.close();
  return { requests, burstyRequests: burstyRequests.count, subjects: subjects.map(({ limiter: _limiter, policy: _policy, ...counts }) => counts) };
}

/** The counters' verdicts on the log's own history: only the estimate differs, never the past. */
async function replayOnLogHistory() {
  const log = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  const counters = PRECISIONS.map((precision) => ({
    precision,
    policy: policyOf(precision),
    recorder: { ...policyOf(precision), limit: 1_000_000_000 },
    limiter: createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) }),
    falseAllow: 0,
    falseDeny: 0,
  }));
  for await (const line of createInterface({ input: createReadStream(TRACE) })) {
    if (line === '') continue;
    const { time, ip } = JSON.parse(line);
    const exact = (await log.limit(ip, policyOf(0), { now: time })).allowed;
    for (const counter of counters) {
      const { allowed } = await counter.limiter.peek(ip, counter.policy, { now: time });
      if (allowed && !exact) counter.falseAllow += 1;
      if (!allowed && exact) counter.falseDeny += 1;
      if (exact) await counter.limiter.limit(ip, counter.recorder, { now: time });
    }
  }
  await log.close();
  for (const counter of counters) await counter.limiter.close();
  return counters.map(({ precision, falseAllow, falseDeny }) => ({ precision, falseAllow, falseDeny }));
}

/**
 * One key as a client at its limit leaves it: a log of LIMIT entries, or a count in every bucket
 * (one request per bucket, costing its share of the limit), spread over one window from `base`.
 */
async function fillKey(limiter, key, policy, precision, base) {
  const hits = precision === 0 ? LIMIT : precision;
  const windowMs = policy.window;
  for (let hit = 0; hit < hits; hit++) await limiter.limit(key, policy, { now: base + Math.floor((hit * windowMs) / hits), cost: LIMIT / hits });
}

/** In a child process (`--memory-child P`): heap + array buffers per key on the memory store. */
async function memoryChild(precision) {
  const store = memoryStore({ sweepIntervalMs: 0, maxKeys: MEMORY_KEYS });
  const limiter = createLimiter({ store });
  // A grown typed array's old buffer is released by V8 a little after the gc that finds it dead:
  // collect and wait, a few times, or it is counted as the store's.
  const used = async () => {
    for (let i = 0; i < 4; i++) {
      globalThis.gc();
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    return heapUsed + arrayBuffers;
  };
  const keys = Array.from({ length: MEMORY_KEYS }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
  const policy = policyOf(precision);
  await limiter.limit('warm-up', policy, { now: START });
  const before = await used();
  for (const key of keys) await fillKey(limiter, key, policy, precision, START);
  const after = await used();
  process.stdout.write(JSON.stringify({ precision, bytesPerKey: (after - before) / MEMORY_KEYS, keys: store.stats().keys }));
}

/**
 * The least of 3 children: garbage that survives a gc (the fill's promises) only ever adds, by up
 * to a hundred bytes a key in one measurement.
 */
function memoryPerKey(precision) {
  const runs = Array.from({ length: 3 }, () =>
    JSON.parse(execFileSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--memory-child', String(precision), '--memory-keys', String(MEMORY_KEYS)], { encoding: 'utf8' })),
  );
  const sorted = runs.map((run) => run.bytesPerKey).sort((a, b) => a - b);
  return { precision, bytesPerKey: sorted[0], runs: sorted };
}

/**
 * Redis used_memory per key of a client at its limit (counts in every bucket; a full log), under
 * 60 per day: the same counts as 60 per minute, and keys that outlive the fill (a key's lifetime
 * follows its policy's window).
 */
async function redisPerKey(server, precision) {
  redisCli(server.port, 'FLUSHALL');
  const usedMemory = () => Number(/used_memory:(\d+)/.exec(redisCli(server.port, 'INFO', 'memory'))[1]);
  const store = redisStore({ url: server.url });
  await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 30_000, failureMode: 'throw' });
  const policy = { ...policyOf(precision), window: DAY };
  // Spread over the day before now (minus a margin): every key lives on after the fill.
  const base = Date.now() - DAY + 600_000;
  const before = usedMemory();
  for (let from = 0; from < REDIS_KEYS; from += 250) {
    await Promise.all(
      Array.from({ length: Math.min(250, REDIS_KEYS - from) }, async (_, i) => {
        const key = `10.0.${(from + i) >> 8}.${(from + i) & 255}`;
        await fillKey(limiter, key, policy, precision, base);
      }),
    );
  }
  const after = usedMemory();
  const sampleKey = precision === 0 ? 'tollgate:{10.0.0.0}:sl:1d' : `tollgate:{10.0.0.0}:sw${precision === 1 ? '' : precision}:1d`;
  const sample = Number(redisCli(server.port, 'MEMORY', 'USAGE', sampleKey).trim());
  const value = precision === 0 ? `${redisCli(server.port, 'LLEN', sampleKey).trim()} entries` : redisCli(server.port, 'GET', sampleKey).trim();
  await limiter.close();
  return { precision, usedMemoryPerKey: (after - before) / REDIS_KEYS, memoryUsage: sample, value };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const speedKeys = Array.from({ length: 1000 }, (_, i) => `10.1.${i >> 8}.${i & 255}`);

/** Median ns per memory-store decision (limitSync), steady traffic near the limit on 1,000 keys. */
function memorySpeed(precision) {
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
  const policy = policyOf(precision);
  let now = START;
  const round = () => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < 1_000_000; i++) limiter.limitSync(speedKeys[i % 1000], policy, { now: now++ });
    return Number(process.hrtime.bigint() - started) / 1_000_000;
  };
  round();
  return median([round(), round(), round()]);
}

/** Median Redis decisions/s on Redis TIME (a lone precision-1 decision takes its lean script). */
async function redisSpeed(server, precision) {
  const store = redisStore({ url: server.url });
  await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 30_000, failureMode: 'throw' });
  const policy = policyOf(precision);
  const round = async () => {
    let next = 0;
    const started = process.hrtime.bigint();
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (next < 20_000) await limiter.limit(speedKeys[next++ % 1000], policy);
    }));
    return 20_000 / (Number(process.hrtime.bigint() - started) / 1e9);
  };
  await round();
  const rate = median([await round(), await round(), await round()]);
  await limiter.close();
  return rate;
}

const label = (precision) => (precision === 0 ? 'sliding-log' : `precision ${precision}`);
const percent = (part, whole) => `${((100 * part) / whole).toFixed(3)}%`;

async function main() {
  const started = Date.now();
  const written = writeTrace();
  console.log(`trace: ${written} requests from ${CLIENTS} clients over ${SECONDS} s (seed ${SEED}) -> ${TRACE}`);
  const { requests, burstyRequests, subjects } = await replay();
  const baseline = subjects.find((s) => s.precision === 1);
  console.log(`\nreplayed ${requests} requests; limit ${LIMIT} per ${WINDOW / 1000} s per ip\n`);
  console.log(`(${burstyRequests} requests from bursty clients, ${requests - burstyRequests} from steady ones)\n`);
  console.log('| algorithm | admitted | differ from sliding-log | false allows | false denies | steady / bursty clients | wrong vs precision 1 |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const s of subjects) {
    const wrong = s.falseAllow + s.falseDeny;
    const ratio = s.precision === 0 ? '' : `${(wrong / (baseline.falseAllow + baseline.falseDeny)).toFixed(3)}×`;
    const split = s.precision === 0 ? '' : `${percent(wrong - s.wrongBursty, requests - burstyRequests)} / ${percent(s.wrongBursty, burstyRequests)}`;
    console.log(`| ${label(s.precision)} | ${s.allowed} | ${s.precision === 0 ? '—' : `${wrong} (${percent(wrong, requests)})`} | ${s.falseAllow} | ${s.falseDeny} | ${split} | ${ratio} |`);
  }
  const onLogHistory = await replayOnLogHistory();
  const baselineVerdicts = onLogHistory[0].falseAllow + onLogHistory[0].falseDeny;
  console.log(`\nThe estimate alone, on the log's history (no earlier difference carries over):\n`);
  console.log('| algorithm | verdicts that differ from sliding-log | false allows | false denies | wrong vs precision 1 |');
  console.log('| --- | ---: | ---: | ---: | ---: |');
  for (const c of onLogHistory) {
    const wrong = c.falseAllow + c.falseDeny;
    console.log(`| ${label(c.precision)} | ${wrong} (${percent(wrong, requests)}) | ${c.falseAllow} | ${c.falseDeny} | ${(wrong / baselineVerdicts).toFixed(3)}× |`);
  }
  if (SKIP_MEMORY) return;
  const memory = [0, ...PRECISIONS].map(memoryPerKey);
  const server = await startRedisServer('precision-redis');
  const redis = [];
  const speed = [];
  try {
    for (const precision of [0, ...PRECISIONS]) redis.push(await redisPerKey(server, precision));
    for (const precision of [0, ...PRECISIONS]) speed.push({ precision, memoryNs: memorySpeed(precision), redisPerSecond: await redisSpeed(server, precision) });
  } finally {
    await stopChild(server.child);
    removeRedisDirs();
  }
  console.log('\n| algorithm | memory store bytes/key | Redis used_memory/key | MEMORY USAGE of one key | its value |');
  console.log('| --- | ---: | ---: | ---: | --- |');
  for (const [i, m] of memory.entries()) {
    console.log(`| ${label(m.precision)} | ${m.bytesPerKey.toFixed(1)} | ${redis[i].usedMemoryPerKey.toFixed(1)} | ${redis[i].memoryUsage} | \`${redis[i].value.slice(0, 60)}${redis[i].value.length > 60 ? '…' : ''}\` |`);
  }
  console.log('\n| algorithm | memory store ns/decision | × precision 1 | Redis decisions/s | × precision 1 |');
  console.log('| --- | ---: | ---: | ---: | ---: |');
  const base = speed.find((row) => row.precision === 1);
  for (const row of speed) {
    console.log(`| ${label(row.precision)} | ${row.memoryNs.toFixed(0)} | ${(row.memoryNs / base.memoryNs).toFixed(2)} | ${row.redisPerSecond.toFixed(0)} | ${(row.redisPerSecond / base.redisPerSecond).toFixed(2)} |`);
  }
  mkdirSync(join(HERE, 'results'), { recursive: true });
  const results = { seed: SEED, clients: CLIENTS, seconds: SECONDS, requests, burstyRequests, limit: LIMIT, windowMs: WINDOW, subjects, onLogHistory, memory, redis, speed, memoryKeys: MEMORY_KEYS, redisKeys: REDIS_KEYS, elapsedMs: Date.now() - started, node: process.version };
  writeFileSync(join(HERE, 'results', 'sliding-window-precision.json'), JSON.stringify(results, null, 2) + '\n');
}

if (argv.includes('--memory-child')) {
  await memoryChild(Number(option('memory-child', 1)));
} else {
  try {
    await main();
  } finally {
    killAllNow();
  }
}
