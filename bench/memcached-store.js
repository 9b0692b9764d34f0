// Tollgate's Memcached store against rate-limiter-flexible's RateLimiterMemcache (over the
// `memcached` client it documents), in one run, on one private memcached.
//
//   npm run build && node bench/memcached-store.js [--rounds N] [--duration MS] [--warmup MS]
//
// The benchmark starts its own memcached (a child process on a free loopback port) and kills it
// by its PID at the end; it never touches another memcached.
//
// Scenarios (each measurement in a fresh forked child process, so JIT state and heaps never carry over):
//   seq   1 request in flight (sequential awaits) over a pool of 10k keys, all admitted:
//         decisions/s and per-call latency p50/p99 (µs).
//   conc  256 requests in flight (256 async workers awaiting in a loop), same key pool.
//   hot   64 requests in flight on one key: Tollgate's compare-and-set rounds at their busiest.
// Every subject is measured once per round, the order alternating between rounds; medians of the
// rounds are reported, and each Tollgate row's ratio to the peer in the same scenario.
// Writes bench/results/memcached-store.json.
import { fork } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';
import { freePort, startChild, stopChild, waitForPort } from './support/children.js';

const SCRIPT = fileURLToPath(import.meta.url);
const HERE = dirname(SCRIPT);
const ROOT = dirname(HERE);
const require = createRequire(import.meta.url);

const ALGORITHMS = ['fixed-window', 'token-bucket', 'gcra', 'sliding-window', 'leaky-bucket'];
const PEER = 'rlflex';
const SUBJECTS = [...ALGORITHMS.map((algorithm) => `tollgate:${algorithm}`), PEER];
const SCENARIOS = { seq: { inFlight: 1, pool: 10_000 }, conc: { inFlight: 256, pool: 10_000 }, hot: { inFlight: 64, pool: 1 } };
/** Far more than a run can issue per key: every decision is admitted (checked). */
const LIMIT = 100_000_000;
const WINDOW_MS = 3_600_000;

const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);

/** `decide(key) → Promise<boolean>` (admitted?) for a subject. */
async function makeSubject(subject, port) {
  if (subject === PEER) {
    const Memcached = require('memcached');
    const { RateLimiterMemcache } = require('rate-limiter-flexible');
    const client = new Memcached(`127.0.0.1:${port}`);
    const limiter = new RateLimiterMemcache({ storeClient: client, points: LIMIT, duration: WINDOW_MS / 1000 });
    return {
      decide: async (key) => {
        try {
          await limiter.consume(key);
          return true;
        } catch (rejected) {
          if (rejected instanceof Error) throw rejected;
          return false;
        }
      },
      close: async () => client.end(),
    };
  }
  const { createLimiter, memcachedStore } = await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href);
  // Generous timeouts: on a loaded machine a slow reply must not end the run.
  const store = memcachedStore({ servers: `127.0.0.1:${port}`, commandTimeoutMs: 10_000, connectTimeoutMs: 10_000 });
  await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });
  const policy = { algorithm: subject.slice('tollgate:'.length), limit: LIMIT, window: WINDOW_MS };
  return { decide: async (key) => (await limiter.limit(key, policy)).allowed, close: () => limiter.close() };
}

/** In a child: warm up, then measure `scenario` for `durationMs`; prints JSON. */
async function measure({ subject, scenario, port, durationMs, warmupMs }) {
  const { inFlight, pool } = SCENARIOS[scenario];
  const { decide, close } = await makeSubject(subject, port);
  const run = Math.random().toString(36).slice(2);
  const keys = Array.from({ length: pool }, (_, i) => `bench:${run}:${i}`);
  const latencies = [];
  let calls = 0;
  let denied = 0;
  const drive = async (until, record) => {
    let next = 0;
    const worker = async () => {
      while (performance.now() < until) {
        const key = keys[next++ % pool];
        const started = performance.now();
        if (!(await decide(key))) denied += 1;
        if (record) {
          calls += 1;
          if (inFlight === 1) latencies.push(performance.now() - started);
        }
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
  };
  await drive(performance.now() + warmupMs, false);
  const started = performance.now();
  await drive(started + durationMs, true);
  const seconds = (performance.now() - started) / 1000;
  await close();
  latencies.sort((a, b) => a - b);
  const quantile = (q) => (latencies.length === 0 ? undefined : Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] * 1000));
  process.stdout.write(JSON.stringify({ perSecond: calls / seconds, denied, p50: quantile(0.5), p99: quantile(0.99) }));
}

function runChild(config) {
  return new Promise((resolve, reject) => {
    const child = fork(SCRIPT, ['--child', JSON.stringify(config)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`${config.subject} ${config.scenario} exited ${code}`))));
  });
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

async function main() {
  const rounds = Number(option('rounds', '3'));
  const durationMs = Number(option('duration', '2000'));
  const warmupMs = Number(option('warmup', '500'));
  const port = await freePort();
  const user = process.getuid?.() === 0 ? ['-u', 'root'] : [];
  const server = startChild('memcached', 'memcached', ['-p', String(port), '-l', '127.0.0.1', '-U', '0', '-m', '256', '-t', '1', ...user]);
  await waitForPort(server, port);
  const samples = {};
  try {
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? SUBJECTS : [...SUBJECTS].reverse();
      for (const scenario of Object.keys(SCENARIOS)) {
        for (const subject of order) {
          const result = await runChild({ subject, scenario, port, durationMs, warmupMs });
          if (result.denied > 0) throw new Error(`${subject} ${scenario}: ${result.denied} denied, the limit should admit all`);
          (samples[`${scenario} ${subject}`] ??= []).push(result);
          console.error(`round ${round + 1} ${scenario.padEnd(4)} ${subject.padEnd(24)} ${Math.round(result.perSecond)}/s${result.p50 === undefined ? '' : ` p50 ${result.p50} µs p99 ${result.p99} µs`}`);
        }
      }
    }
  } finally {
    await stopChild(server);
  }
  const rows = {};
  for (const scenario of Object.keys(SCENARIOS)) {
    const peer = median(samples[`${scenario} ${PEER}`].map((sample) => sample.perSecond));
    console.log(`\n${scenario} (${SCENARIOS[scenario].inFlight} in flight over ${SCENARIOS[scenario].pool} key${SCENARIOS[scenario].pool === 1 ? '' : 's'})`);
    for (const subject of SUBJECTS) {
      const list = samples[`${scenario} ${subject}`];
      const perSecond = median(list.map((sample) => sample.perSecond));
      const p50 = list[0].p50 === undefined ? undefined : median(list.map((sample) => sample.p50));
      const p99 = list[0].p99 === undefined ? undefined : median(list.map((sample) => sample.p99));
      rows[`${scenario} ${subject}`] = { perSecond: Math.round(perSecond), p50, p99, ratio: perSecond / peer };
      console.log(`  ${subject.padEnd(24)} ${String(Math.round(perSecond)).padStart(7)}/s  ×${(perSecond / peer).toFixed(2)} of the peer${p50 === undefined ? '' : `  p50 ${p50} µs  p99 ${p99} µs`}`);
    }
  }
  const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  const memcachedVersion = execFileSync('memcached', ['-V']).toString().trim();
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(
    join(HERE, 'results', 'memcached-store.json'),
    JSON.stringify({ date: new Date().toISOString(), git, node: process.version, memcached: memcachedVersion, cpus: cpus().length, loadavg: loadavg(), rounds, durationMs, rows, samples }, null, 2),
  );
}

if (argv[0] === '--child') await measure(JSON.parse(argv[1]));
else await main();
