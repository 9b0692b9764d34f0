// Fair shares (`share: { group, weight }`): how fair under a noisy neighbour, and what a decision costs.
//
//   npm run build && node bench/fair-share.js [--repeats 3] [--duration 2000] [--warmup 500] [--windows 10]
//
// Every sample is written to bench/results/fair-share.json.
//
// 1. Fairness. 10 tenants share a limit of 1,000 per window; 9 ask at their own pace, the noisy one
//    asks 10× as often as each of them. Each window every tenant's requests are shuffled together
//    (a seeded PRNG, the same order for every subject) and decided at an explicit `now` inside the
//    window, so the run is deterministic and takes no wall-clock time. Two weightings: all weights 1,
//    and weights 1, 1, 1, 2, 2, 2, 3, 3, 3 for the nine (the noisy one weight 1). Demand exceeds every
//    share, so max-min fairness gives each tenant L × w / Σw. Subjects: `share` (the tenants'
//    own keys, one group), and `one counter` (every tenant on one fixed-window key of the same limit:
//    first come, first served, what a shared limit without shares does). Reported: each tenant's
//    mean admitted per window (windows 2..N: the first one meets tenants that have not asked yet)
//    against its weighted share, and Jain's index of admitted / share (1 = exactly fair).
// 2. Cost. A fair-share decision beside a plain fixed-window decision, on the memory store and on a
//    redis-server this script starts (a child process on a free loopback port, no persistence;
//    killed by its PID at the end). Each measurement runs in a fresh forked process: 64 async
//    workers over 100 groups of 10 tenants (and 4 groups of 256, the cap: a decision reads every
//    active tenant of its group), every request admitted. units/s, p50/p99 µs, Redis µs per decision
//    (INFO commandstats). Subjects interleave in each repeat, the order alternating; medians.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { stopChild } from './support/children.js';
import { forkedEntry, runForked } from './support/forked.js';
import { redisCli, redisCounters, redisDelta, removeRedisDirs, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const IN_FLIGHT = 64;
const COST_SUBJECTS = ['memory fixed-window', 'memory share/10', 'memory share/256', 'redis fixed-window', 'redis share/10', 'redis share/256'];
const KEYS = 1_000;
const WINDOW = 60_000;
const LIMIT = 1_000;
const NORMAL_DEMAND = 200;
const WEIGHTINGS = { 'equal weights': [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 'weights 1-3': [1, 1, 1, 1, 2, 2, 2, 3, 3, 3] };

function flag(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
}

/** A seeded PRNG (mulberry32): the same shuffles for every subject. */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Tenant 0 is the noisy one (10× the demand of each other). */
async function fairness(limiter, weights, subject, windows, run) {
  const tenants = weights.map((weight, index) => ({ key: `${run}:tenant-${index}`, weight, demand: index === 0 ? 10 * NORMAL_DEMAND : NORMAL_DEMAND }));
  const sum = weights.reduce((a, b) => a + b, 0);
  const admitted = tenants.map(() => 0);
  const next = random(42);
  const start = Math.ceil(Date.now() / WINDOW) * WINDOW;
  for (let window = 0; window < windows; window++) {
    const order = tenants.flatMap((tenant, index) => Array(tenant.demand).fill(index));
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    const now = start + window * WINDOW + 1;
    for (const index of order) {
      const tenant = tenants[index];
      const policy = subject === 'share' ? { algorithm: 'fixed-window', limit: LIMIT, window: WINDOW, share: { group: `${run}:group`, weight: tenant.weight } } : { algorithm: 'fixed-window', limit: LIMIT, window: WINDOW };
      const decision = await limiter.limit(subject === 'share' ? tenant.key : `${run}:one-counter`, policy, { now });
      if (decision.allowed && window > 0) admitted[index] += 1;
    }
  }
  const perWindow = admitted.map((count) => count / (windows - 1));
  const shares = weights.map((weight) => (LIMIT * weight) / sum);
  const x = perWindow.map((got, index) => got / shares[index]);
  const jain = x.reduce((a, b) => a + b, 0) ** 2 / (x.length * x.reduce((a, b) => a + b * b, 0));
  return { perWindow, shares, jain };
}

async function measureCost({ subject, port, warmupMs, durationMs }) {
  const { createLimiter, memoryStore, redisStore } = await import('../dist/index.js');
  const [storeName, what] = subject.split(' ');
  const store = storeName === 'memory' ? memoryStore() : redisStore({ url: `redis://127.0.0.1:${port}` });
  if (storeName === 'redis') await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 5_000, overLimitCache: false });
  const tenantsPerGroup = what === 'fixed-window' ? 1 : Number(what.split('/')[1]);
  // One policy object per tenant position (its weight), made once: the hot path compiles nothing.
  const policies = Array.from({ length: tenantsPerGroup }, (_, index) => Array.from({ length: Math.ceil(KEYS / tenantsPerGroup) }, (_, group) =>
    what === 'fixed-window' ? { algorithm: 'fixed-window', limit: 1e9, window: '1h' } : { algorithm: 'fixed-window', limit: 1e9, window: '1h', share: { group: `g${group}`, weight: 1 + (index % 3) } }));
  const latencies = [];
  let phase = 'warmup';
  let next = 0;
  let done = 0;
  let denied = 0;
  let calls = 0;
  const worker = async () => {
    while (phase !== 'done') {
      if ((++calls & 255) === 0) await new Promise((resolve) => setImmediate(resolve));
      const n = next++ % KEYS;
      const policy = policies[n % tenantsPerGroup][Math.floor(n / tenantsPerGroup)];
      const started = performance.now();
      const { allowed } = await limiter.limit(`k${n}`, policy);
      if (phase !== 'timed') continue;
      latencies.push((performance.now() - started) * 1_000);
      done += 1;
      if (!allowed) denied += 1;
    }
  };
  const workers = Array.from({ length: IN_FLIGHT }, worker);
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  const before = port === undefined ? undefined : redisCounters(port);
  phase = 'timed';
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  phase = 'done';
  const seconds = (performance.now() - started) / 1_000;
  const { commands } = storeName === 'redis' ? redisDelta([before], [redisCounters(port)]) : { commands: {} };
  await Promise.all(workers);
  await limiter.close();
  let usec = 0;
  for (const name of ['evalsha', 'eval', 'fcall']) usec += commands[name]?.usec ?? 0;
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
  return { perSecond: done / seconds, p50: at(0.5), p99: at(0.99), usecPerUnit: usec / done, denied };
}

async function measureFairness({ port, windows }) {
  const { createLimiter, memoryStore, redisStore } = await import('../dist/index.js');
  const results = {};
  for (const storeName of ['memory', 'redis']) {
    const store = storeName === 'memory' ? memoryStore() : redisStore({ url: `redis://127.0.0.1:${port}` });
    if (storeName === 'redis') await store.ready();
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    for (const [weighting, weights] of Object.entries(WEIGHTINGS)) {
      for (const subject of ['share', 'one counter']) {
        results[`${storeName}|${weighting}|${subject}`] = await fairness(limiter, weights, subject, windows, `${storeName}-${weighting}-${subject}`.replaceAll(' ', '_'));
      }
    }
    await limiter.close();
  }
  return results;
}

const runChild = (spec) => runForked(SCRIPT, spec);

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

function printFairness(fair) {
  console.log('\n| store | weights | subject | noisy tenant: admitted / share | the nine: admitted / share (min – max) | Jain index |');
  console.log('|---|---|---|---:|---:|---:|');
  for (const [name, { perWindow, shares, jain }] of Object.entries(fair)) {
    const [storeName, weighting, subject] = name.split('|');
    const ratios = perWindow.map((got, index) => got / shares[index]);
    const rest = ratios.slice(1);
    console.log(`| ${storeName} | ${weighting} | ${subject} | ${perWindow[0].toFixed(1)} / ${shares[0].toFixed(1)} | ${Math.min(...rest).toFixed(2)} – ${Math.max(...rest).toFixed(2)} | ${jain.toFixed(3)} |`);
  }
  const detail = fair['redis|weights 1-3|share'];
  console.log(`\nweights 1-3 on Redis with share, per tenant (weight: admitted per window / share): ${WEIGHTINGS['weights 1-3'].map((w, i) => `${w}: ${detail.perWindow[i].toFixed(1)}/${detail.shares[i].toFixed(1)}`).join(', ')}`);
}

async function main() {
  const repeats = flag('repeats', 3);
  const durationMs = flag('duration', 2_000);
  const warmupMs = flag('warmup', 500);
  const windows = flag('windows', 10);
  const redis = await startRedisServer('fair-share-redis');
  const results = {};
  let fair;
  try {
    fair = await runChild({ fairness: true, port: redis.port, windows });
    for (let round = 0; round < repeats; round++) {
      for (const subject of round % 2 === 0 ? COST_SUBJECTS : [...COST_SUBJECTS].reverse()) {
        redisCli(redis.port, 'FLUSHALL');
        const result = await runChild({ subject, port: redis.port, warmupMs, durationMs });
        if (result.denied > 0) throw new Error(`${subject} denied ${result.denied}: the policy must admit all`);
        (results[subject] ??= []).push(result);
        console.error(`round ${round + 1} ${subject}: ${Math.round(result.perSecond)}/s`);
      }
    }
  } finally {
    await stopChild(redis.child);
    removeRedisDirs();
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const info = { nproc: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, commit, date: new Date().toISOString() };
  writeFileSync(new URL('./results/fair-share.json', import.meta.url), `${JSON.stringify({ info, options: { repeats, durationMs, warmupMs, windows, inFlight: IN_FLIGHT, keys: KEYS }, fairness: fair, samples: results }, null, 1)}\n`);
  console.log(`${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}; fairness over ${windows} windows, a limit of ${LIMIT} per window; cost: ${repeats} repeats of ${durationMs} ms, ${IN_FLIGHT} in flight, ${KEYS} keys; medians`);
  printFairness(fair);
  console.log('\n| store | subject | decisions/s | × fixed-window | p50 µs | p99 µs | Redis µs per decision (commandstats) |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  for (const subject of COST_SUBJECTS) {
    const [storeName, what] = subject.split(' ');
    const runs = results[subject];
    const perSecond = median(runs.map((r) => r.perSecond));
    const plain = median(results[`${storeName} fixed-window`].map((r) => r.perSecond));
    const cell = (field, digits) => median(runs.map((r) => r[field])).toFixed(digits);
    console.log(`| ${storeName} | ${what} | ${Math.round(perSecond).toLocaleString('en')} | ${(perSecond / plain).toFixed(2)} | ${cell('p50', 0)} | ${cell('p99', 0)} | ${storeName === 'redis' ? cell('usecPerUnit', 1) : '–'} |`);
  }
}

forkedEntry((spec) => (spec.fairness ? measureFairness(spec) : measureCost(spec)), main);
