// The limiter's own cost per decision in each mode, in-process (what the middleware adds to a
// request): exact on Redis, a token lease, local-first, and the embedded memory store, against
// rate-limiter-flexible's RateLimiterRedis (what a user would otherwise pick), in one run.
//
//   npm run build && node bench/library-modes.js [--repeats 3] [--duration 3000] [--warmup 1000]
//
// It starts its own redis-server (a child process on a free loopback port, no persistence) and
// kills it by its PID at the end. Each measurement runs in a fresh forked process: 64 async
// workers, each awaiting one decision at a time, over a key pool (`hot`: 64 keys; `spread`:
// 10,000), every decision admitted (a fixed window of 10^9 an hour). It reports decisions/s,
// per-call latency p50/p99 (µs), and Redis script calls per decision (INFO commandstats around
// the timed window). Subjects interleave in each repeat, the order alternating; medians.
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { killAllNow, stopChild } from './support/children.js';
import { redisCli, removeRedisDirs, startRedisServer } from './support/redis.js';

const require = createRequire(import.meta.url);
const SCRIPT = fileURLToPath(import.meta.url);
const SUBJECTS = ['tollgate:exact', 'tollgate:lease-100', 'tollgate:local-first-100ms', 'tollgate:memory', 'rlflex'];
const POOLS = { hot: 64, spread: 10_000 };
const IN_FLIGHT = 64;
const POLICY = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1h' };

function flag(name, fallback) {
  const index = process.argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(process.argv[index + 1]);
}

/** `decide(key) → Promise<boolean>` for a subject. */
async function subjectOf(name, port) {
  if (name.startsWith('tollgate:')) {
    const { createLimiter, memoryStore, redisStore } = await import('../dist/index.js');
    const mode = name.slice('tollgate:'.length);
    let store = memoryStore();
    if (mode !== 'memory') {
      store = redisStore({ url: `redis://127.0.0.1:${port}` });
      await store.ready();
    }
    const limiter = createLimiter({ store, deadlineMs: 5_000 });
    const options = mode === 'lease-100' ? { lease: 100 } : mode === 'local-first-100ms' ? { syncIntervalMs: 100 } : undefined;
    return { decide: async (key) => (await limiter.limit(key, POLICY, options)).allowed, close: () => limiter.close() };
  }
  const { Redis } = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const client = new Redis({ host: '127.0.0.1', port });
  await new Promise((resolve, reject) => client.once('ready', resolve).once('error', reject));
  const limiter = new RateLimiterRedis({ storeClient: client, points: POLICY.limit, duration: 3_600, keyPrefix: 'rlflx' });
  return {
    decide: async (key) => {
      await limiter.consume(key);
      return true;
    },
    close: () => client.quit(),
  };
}

async function measure({ subject, port, pool, warmupMs, durationMs }) {
  const { Redis } = require('ioredis');
  const admin = new Redis({ host: '127.0.0.1', port });
  const { decide, close } = await subjectOf(subject, port);
  const latencies = [];
  let phase = 'warmup';
  let next = 0;
  let decided = 0;
  let denied = 0;
  let calls = 0;
  const worker = async () => {
    while (phase !== 'done') {
      // A synchronous store (memory, a local-first view) answers in microtasks: yield now and then
      // so the timers that end the phases can run.
      if ((++calls & 255) === 0) await new Promise((resolve) => setImmediate(resolve));
      const key = `k${next++ % pool}`;
      const started = performance.now();
      const allowed = await decide(key);
      if (phase !== 'timed') continue;
      latencies.push((performance.now() - started) * 1_000);
      decided += 1;
      if (!allowed) denied += 1;
    }
  };
  const workers = Array.from({ length: IN_FLIGHT }, worker);
  await new Promise((resolve) => setTimeout(resolve, warmupMs));
  const before = scriptCalls(await admin.info('commandstats'));
  phase = 'timed';
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  phase = 'done';
  const seconds = (performance.now() - started) / 1_000;
  await Promise.all(workers);
  const scripts = scriptCalls(await admin.info('commandstats')) - before;
  await close();
  await admin.quit();
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
  return { perSecond: decided / seconds, p50: at(0.5), p99: at(0.99), callsPerDecision: scripts / decided, denied };
}

function scriptCalls(info) {
  let calls = 0;
  for (const match of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) calls += Number(match[1]);
  return calls;
}

function runChild(spec) {
  return new Promise((resolve, reject) => {
    const child = fork(SCRIPT, ['--child', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`${spec.subject} exited ${code}`))));
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  const repeats = flag('repeats', 3);
  const durationMs = flag('duration', 3_000);
  const warmupMs = flag('warmup', 1_000);
  const redis = await startRedisServer('library-modes-redis');
  const results = {};
  try {
    for (let round = 0; round < repeats; round++) {
      const order = round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse();
      for (const [poolName, pool] of Object.entries(POOLS)) {
        for (const subject of order) {
          redisCli(redis.port, 'FLUSHALL');
          const result = await runChild({ subject, port: redis.port, pool, warmupMs, durationMs });
          if (result.denied > 0) throw new Error(`${subject} denied ${result.denied} decisions: the policy must admit all`);
          (results[`${poolName} ${subject}`] ??= []).push(result);
          console.error(`round ${round + 1} ${poolName} ${subject}: ${Math.round(result.perSecond)}/s`);
        }
      }
    }
  } finally {
    await stopChild(redis.child);
    removeRedisDirs();
  }
  console.log(`${cpus().length} cores (${cpus()[0]?.model}), Node ${process.version}, ${repeats} repeats of ${durationMs} ms, ${IN_FLIGHT} in flight; medians\n`);
  console.log('| keys | subject | decisions/s | × exact | p50 µs | p99 µs | script calls per decision |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  for (const poolName of Object.keys(POOLS)) {
    const exact = median(results[`${poolName} tollgate:exact`].map((r) => r.perSecond));
    for (const subject of SUBJECTS) {
      const runs = results[`${poolName} ${subject}`];
      const perSecond = median(runs.map((r) => r.perSecond));
      const cell = (field, digits) => median(runs.map((r) => r[field])).toFixed(digits);
      console.log(`| ${poolName} (${POOLS[poolName].toLocaleString('en')}) | ${subject} | ${Math.round(perSecond).toLocaleString('en')} | ${(perSecond / exact).toFixed(2)} | ${cell('p50', 0)} | ${cell('p99', 0)} | ${cell('callsPerDecision', 3)} |`);
    }
  }
}

if (process.argv[2] === '--child') {
  measure(JSON.parse(process.argv[3])).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      process.exit(0);
    },
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
} else {
  process.on('SIGINT', () => {
    killAllNow();
    process.exit(130);
  });
  main().catch((error) => {
    console.error(error);
    killAllNow();
    process.exit(1);
  });
}
