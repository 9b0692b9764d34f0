// Reserve then settle against a plain decision, in the library: how many reserve+settle pairs a
// process makes per second beside how many `limit` calls, and what each costs Redis.
//
//   npm run build && node bench/reservations.js [--repeats 3] [--duration 2000] [--warmup 500]
//     [--algorithms token-bucket,sliding-log,sliding-window-10] [--in-flight 64]
//
// Every sample is written to bench/results/reservations.json (reservations-<algorithms>.json for
// another set than token-bucket alone).
//
// It starts its own redis-server (a child process on a free loopback port, no persistence) and
// kills it by its PID at the end. Each measurement runs in a fresh forked process: 64 async (--in-flight)
// workers, each awaiting one unit at a time over 10,000 keys (a `limit`, or a `reserve` then its
// `settle` with another cost), every request admitted (10^6 a minute per key: a token bucket, or with
// --algorithms a sliding log, a sliding window of precision 10). It reports
// units/s, p50/p99 µs of a unit, and Redis's script calls and usec per unit (INFO commandstats
// around the timed window). Subjects interleave in each repeat, the order alternating; medians.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { stopChild } from './support/children.js';
import { forkedEntry, median, runForked } from './support/forked.js';
import { redisCli, redisCounters, redisDelta, removeRedisDirs, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const KINDS = ['redis limit', 'redis reserve+settle', 'memory limit', 'memory reserve+settle'];
const KEYS = 10_000;
const POLICIES = {
  'token-bucket': { algorithm: 'token-bucket', limit: 1_000_000, window: '1m' },
  'sliding-log': { algorithm: 'sliding-log', limit: 1_000_000, window: '1m' },
  'sliding-window-10': { algorithm: 'sliding-window', limit: 1_000_000, window: '1m', precision: 10 },
};

function flag(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
}

/** --algorithms a,b: the policies to run (token-bucket alone by default). */
function algorithms() {
  const index = process.argv.indexOf('--algorithms');
  const names = index === -1 ? ['token-bucket'] : process.argv[index + 1].split(',');
  for (const name of names) if (POLICIES[name] === undefined) throw new Error(`--algorithms: ${name} is not one of ${Object.keys(POLICIES).join(', ')}`);
  return names;
}

async function measure({ subject, port, warmupMs, durationMs, inFlight }) {
  const { createLimiter, memoryStore, redisStore } = await import('../dist/index.js');
  const [storeName, what, algorithm] = subject.split(' ');
  const policy = POLICIES[algorithm];
  // A long command timeout: on a shared machine a call may wait seconds for the CPU, and one rejected settle would end the sample.
  const store = storeName === 'memory' ? memoryStore() : redisStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 30_000 });
  if (storeName === 'redis') await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 30_000 });
  let sequence = 0;
  const unit =
    what === 'limit'
      ? async (key) => (await limiter.limit(key, policy, { cost: 40 })).allowed
      : async (key) => {
          const id = `r${sequence++}`;
          const reserved = await limiter.reserve(key, policy, { cost: 50, id });
          await limiter.settle(key, policy, { id, cost: 40 });
          return reserved.allowed;
        };
  const latencies = [];
  let phase = 'warmup';
  let next = 0;
  let done = 0;
  let denied = 0;
  let calls = 0;
  const worker = async () => {
    while (phase !== 'done') {
      if ((++calls & 255) === 0) await new Promise((resolve) => setImmediate(resolve));
      const started = performance.now();
      const allowed = await unit(`k${next++ % KEYS}`);
      if (phase !== 'timed') continue;
      latencies.push((performance.now() - started) * 1_000);
      done += 1;
      if (!allowed) denied += 1;
    }
  };
  const workers = Array.from({ length: inFlight }, worker);
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  const before = redisCounters(port);
  phase = 'timed';
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  phase = 'done';
  const seconds = (performance.now() - started) / 1_000;
  const { commands } = redisDelta([before], [redisCounters(port)]);
  await Promise.all(workers);
  await limiter.close();
  let scripts = 0;
  let usec = 0;
  for (const name of ['evalsha', 'eval', 'fcall']) {
    scripts += commands[name]?.calls ?? 0;
    usec += commands[name]?.usec ?? 0;
  }
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
  return { perSecond: done / seconds, p50: at(0.5), p99: at(0.99), scriptsPerUnit: scripts / done, usecPerUnit: usec / done, denied };
}


async function main() {
  const repeats = flag('repeats', 3);
  const durationMs = flag('duration', 2_000);
  const warmupMs = flag('warmup', 500);
  const inFlight = flag('in-flight', 64);
  const names = algorithms();
  const SUBJECTS = names.flatMap((name) => KINDS.map((kind) => `${kind} ${name}`));
  const redis = await startRedisServer('reservations-redis');
  const results = {};
  try {
    for (let round = 0; round < repeats; round++) {
      for (const subject of round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse()) {
        redisCli(redis.port, 'FLUSHALL');
        const result = await runForked(SCRIPT, { subject, port: redis.port, warmupMs, durationMs, inFlight });
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
  const file = names.join(',') === 'token-bucket' && inFlight === 64 ? 'reservations.json' : `reservations-${names.join('-')}${inFlight === 64 ? '' : `-${inFlight}-in-flight`}.json`;
  const policies = Object.fromEntries(names.map((name) => [name, POLICIES[name]]));
  writeFileSync(new URL(`./results/${file}`, import.meta.url), `${JSON.stringify({ info, options: { repeats, durationMs, warmupMs, inFlight, keys: KEYS, policies }, samples: results }, null, 1)}\n`);
  console.log(`${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, ${repeats} repeats of ${durationMs} ms, ${inFlight} in flight, ${KEYS} keys; medians\n`);
  console.log('| algorithm | store | subject | units/s | × limit | p50 µs | p99 µs | script calls per unit | Redis µs per unit (commandstats) |');
  console.log('|---|---|---|---:|---:|---:|---:|---:|---:|');
  for (const subject of SUBJECTS) {
    const [storeName, what, algorithm] = subject.split(' ');
    const runs = results[subject];
    const perSecond = median(runs.map((r) => r.perSecond));
    const plain = median(results[`${storeName} limit ${algorithm}`].map((r) => r.perSecond));
    const cell = (field, digits) => median(runs.map((r) => r[field])).toFixed(digits);
    console.log(`| ${algorithm} | ${storeName} | ${what} | ${Math.round(perSecond).toLocaleString('en')} | ${(perSecond / plain).toFixed(2)} | ${cell('p50', 0)} | ${cell('p99', 0)} | ${cell('scriptsPerUnit', 3)} | ${cell('usecPerUnit', 1)} |`);
  }
}

forkedEntry(measure, main);
