// What a usage ledger costs a decision: `limiter.limit()` of a policy with `ledger` against the same
// policy without, on one Redis and on the memory store; and the same policy without a ledger on the
// branch's base commit (a build of it given with --base DIR), to show a plain decision pays nothing.
//
//   npm run build && node bench/ledger-decide.js [--repeats 5] [--duration 2000] [--warmup 500] [--base /tmp/base] [--only memory]
//
// Every sample is written to bench/results/ledger-decide.json. It starts its own redis-server (no
// persistence) and kills it by PID at the end. Each measurement is a fresh forked process:
// `inFlight` async workers (64), each awaiting one decision at a time over 10,000 keys, every one
// admitted (a calendar month of 10^9 per key; the ledger by month, kept 13). Redis script calls and
// usec from INFO commandstats around the timed window. Subjects interleave; the order alternates.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stopChild } from './support/children.js';
import { forkedEntry, median, runForked as runChild } from './support/forked.js';
import { redisCli, redisCounters, redisDelta, removeRedisDirs, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const KEYS = 10_000;
const IN_FLIGHT = 64;
const PLAIN = { algorithm: 'fixed-window', limit: 1_000_000_000, window: 'month' };
const LEDGER = { ...PLAIN, ledger: { keep: 13 } };

const flag = (name, fallback) => {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : process.argv[index + 1];
};

async function measure({ subject, port, warmupMs, durationMs, dist }) {
  const { createLimiter, memoryStore, redisStore } = await import(pathToFileURL(`${dist}/index.js`).href);
  const [storeName, ledger] = subject.split(' ');
  const store = storeName === 'memory' ? memoryStore() : redisStore({ url: `redis://127.0.0.1:${port}` });
  if (storeName === 'redis') await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 5_000 });
  const policy = ledger === 'ledger' ? LEDGER : PLAIN;
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
      const decision = await limiter.limit(`k${next++ % KEYS}`, policy);
      if (phase !== 'timed') continue;
      latencies.push((performance.now() - started) * 1_000);
      done += 1;
      if (!decision.allowed || decision.reason !== undefined) denied += 1;
    }
  };
  const workers = Array.from({ length: IN_FLIGHT }, worker);
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  const before = redisCounters(port);
  phase = 'timed';
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  phase = 'done';
  const seconds = (performance.now() - started) / 1_000;
  const { commands } = redisDelta([before], [redisCounters(port)]);
  await Promise.all(workers);
  const failed = limiter.ledger?.stats().failed ?? 0;
  await limiter.close();
  let scripts = 0;
  let usec = 0;
  for (const name of ['evalsha', 'eval', 'fcall']) {
    scripts += commands[name]?.calls ?? 0;
    usec += commands[name]?.usec ?? 0;
  }
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
  return { perSecond: done / seconds, p50: at(0.5), p99: at(0.99), scriptsPerDecision: scripts / done, usecPerDecision: usec / done, denied, failed };
}

async function main() {
  const repeats = Number(flag('repeats', 5));
  const durationMs = Number(flag('duration', 2_000));
  const warmupMs = Number(flag('warmup', 500));
  const base = flag('base', undefined);
  const here = fileURLToPath(new URL('../dist', import.meta.url));
  const subjects = [
    { subject: 'redis plain', dist: here },
    { subject: 'redis ledger', dist: here },
    { subject: 'memory plain', dist: here },
    { subject: 'memory ledger', dist: here },
    ...(base === undefined ? [] : [{ subject: 'redis plain', dist: `${base}/dist`, label: 'base' }, { subject: 'memory plain', dist: `${base}/dist`, label: 'base' }]),
  ];
  // --only memory: the memory store's subjects alone (an A/B of the plain decision against the base).
  const only = flag('only', undefined);
  if (only !== undefined) subjects.splice(0, subjects.length, ...subjects.filter((spec) => spec.subject.startsWith(only)));
  const redis = await startRedisServer('ledger-decide-redis');
  const results = {};
  try {
    for (let round = 0; round < repeats; round++) {
      for (const spec of round % 2 === 0 ? subjects : [...subjects].reverse()) {
        redisCli(redis.port, 'FLUSHALL');
        const result = await runChild(SCRIPT, { ...spec, port: redis.port, warmupMs, durationMs });
        if (result.denied > 0 || result.failed > 0) throw new Error(`${spec.subject}: ${result.denied} denied or degraded, ${result.failed} ledger writes failed`);
        const name = `${spec.subject}${spec.label === undefined ? '' : ` (${spec.label})`}`;
        (results[name] ??= []).push(result);
        console.error(`round ${round + 1} ${name}: ${Math.round(result.perSecond)}/s`);
      }
    }
  } finally {
    await stopChild(redis.child);
    removeRedisDirs();
  }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const info = { nproc: cpus().length, cpuModel: cpus()[0]?.model, node: process.version, commit, date: new Date().toISOString() };
  writeFileSync(new URL('./results/ledger-decide.json', import.meta.url), `${JSON.stringify({ info, options: { repeats, durationMs, warmupMs, inFlight: IN_FLIGHT, keys: KEYS, policy: LEDGER }, samples: results }, null, 1)}\n`);
  console.log(`${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, ${repeats} repeats of ${durationMs} ms, ${IN_FLIGHT} in flight, ${KEYS} keys; medians\n`);
  console.log('| subject | decisions/s | × plain | p50 µs | p99 µs | script calls per decision | Redis µs per decision |');
  console.log('|---|---:|---:|---:|---:|---:|---:|');
  for (const [name, runs] of Object.entries(results)) {
    const perSecond = median(runs.map((r) => r.perSecond));
    const plain = median(results[`${name.split(' ')[0]} plain`].map((r) => r.perSecond));
    const cell = (field, digits) => median(runs.map((r) => r[field])).toFixed(digits);
    console.log(`| ${name} | ${Math.round(perSecond).toLocaleString('en')} | ${(perSecond / plain).toFixed(2)} | ${cell('p50', 0)} | ${cell('p99', 0)} | ${cell('scriptsPerDecision', 3)} | ${cell('usecPerDecision', 1)} |`);
  }
}

forkedEntry(measure, main);
