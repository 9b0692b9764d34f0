// A lone Redis decision: one decision in flight (sequential awaits), Tollgate's Redis store
// (fixed-window, token-bucket; on Redis TIME, and with --caller also on the process clock,
// redisStore({ clock: 'caller' })) against rate-limiter-flexible's RateLimiterRedis, one private
// redis-server, in one run.
//
//   npm run build && node bench/redis-lone.js [--rounds N] [--duration MS] [--warmup MS] [--before DIST] [--caller] [--only fixed-window]
//
// --before DIST adds the same Tollgate subjects built from another tree (e.g. git main's dist/),
// so before and after run side by side. Every subject runs in a fresh forked child, rounds
// alternate the order; medians are reported, with ratios to the peer. Redis µs per call and
// commands per call come from INFO commandstats (CONFIG RESETSTAT after the warm-up).
// Children inherit node's flags: `node --cpu-prof --cpu-prof-dir=/tmp/lone bench/redis-lone.js` profiles
// each subject (summarise with bench/profile-top.js).
// The redis-server is a child of this script (free loopback port, no persistence), killed by its PID.
import { spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { freePort } from './support/children.js';
import { forkedEntry, runForked } from './support/forked.js';
import { median } from './support/service-nodes.js';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT = dirname(dirname(SCRIPT));
const require = createRequire(import.meta.url);
const POOL = 10_000;
const POLICY = { limit: 1_000_000, windowMs: 60_000 };

function option(argv, name, fallback) {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : argv[index + 1];
}

async function makeSubject(subject, port) {
  const [kind, algorithm, dist, clock] = subject;
  if (kind === 'tollgate') {
    const { createLimiter, redisStore } = await import(pathToFileURL(join(dist, 'index.js')).href);
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, keyPrefix: `lone${algorithm.length}${clock ?? ''}:`, ...(clock === undefined ? {} : { clock }) });
    await store.ready();
    const limiter = createLimiter({ store });
    const policy = { algorithm, limit: POLICY.limit, window: POLICY.windowMs };
    return { decide: async (key) => (await limiter.limit(key, policy)).allowed, close: () => limiter.close() };
  }
  const { Redis } = require('ioredis');
  const { RateLimiterRedis } = require('rate-limiter-flexible');
  const client = new Redis({ host: '127.0.0.1', port });
  await new Promise((done, fail) => {
    client.once('ready', done);
    client.once('error', fail);
  });
  const rl = new RateLimiterRedis({ storeClient: client, points: POLICY.limit, duration: POLICY.windowMs / 1000, keyPrefix: 'rlflx' });
  return {
    decide: async (key) => {
      await rl.consume(key);
      return true;
    },
    close: () => client.quit(),
  };
}

async function commandStats(admin) {
  const stats = { calls: 0, usec: 0 };
  for (const line of (await admin.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (match === null || match[1] === 'config' || match[1] === 'info') continue;
    stats.calls += Number(match[2]);
    stats.usec += Number(match[3]);
  }
  return stats;
}

async function child({ subject, port, durationMs, warmupMs }) {
  const { Redis } = require('ioredis');
  const admin = new Redis({ host: '127.0.0.1', port });
  const { decide, close } = await makeSubject(subject, port);
  const keys = Array.from({ length: POOL }, (_, i) => `user:${i}`);
  let i = 0;
  for (const end = performance.now() + warmupMs; performance.now() < end; ) await decide(keys[i++ % POOL]);
  await admin.config('RESETSTAT');
  // CPU time (client process, redis-server) per call: on a shared machine it moves far less than
  // wall time, which counts the time a process waited for a core.
  const redisCpu0 = redisCpuSeconds(await admin.info('cpu'));
  const cpu0 = process.cpuUsage();
  const latencies = [];
  let denied = 0;
  const started = performance.now();
  const end = started + durationMs;
  for (let t = started; t < end; ) {
    const allowed = await decide(keys[i++ % POOL]);
    const after = performance.now();
    latencies.push(after - t);
    if (!allowed) denied++;
    t = after;
  }
  const elapsed = performance.now() - started;
  const cpu = process.cpuUsage(cpu0);
  const redisCpu = redisCpuSeconds(await admin.info('cpu')) - redisCpu0;
  const stats = await commandStats(admin);
  await close();
  await admin.quit();
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] * 1000;
  const n = latencies.length;
  return {
    perSecond: (n / elapsed) * 1000, p50: at(0.5), p99: at(0.99), denied, commandsPerCall: stats.calls / n, redisUsPerCall: stats.usec / n,
    clientCpuUs: (cpu.user + cpu.system) / n, redisCpuUs: (redisCpu * 1e6) / n,
  };
}

/** redis-server's CPU seconds (user + system, main thread included) from INFO cpu. */
function redisCpuSeconds(info) {
  const field = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)[1]);
  return field('used_cpu_user') + field('used_cpu_sys');
}

async function main(argv) {
  const rounds = Number(option(argv, 'rounds', 5));
  const durationMs = Number(option(argv, 'duration', 3000));
  const warmupMs = Number(option(argv, 'warmup', 1000));
  const before = option(argv, 'before', undefined);
  const after = join(ROOT, 'dist');
  const subjects = [];
  const only = option(argv, 'only', undefined);
  for (const algorithm of ['fixed-window', 'token-bucket'].filter((name) => only === undefined || name === only)) {
    if (before) subjects.push({ label: `before ${algorithm}`, subject: ['tollgate', algorithm, resolve(before)] });
    subjects.push({ label: `after ${algorithm}`, subject: ['tollgate', algorithm, after] });
    if (argv.includes('--caller')) subjects.push({ label: `after ${algorithm} clock caller`, subject: ['tollgate', algorithm, after, 'caller'] });
  }
  subjects.push({ label: 'rlflex RateLimiterRedis', subject: ['rlflex'] });
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  try {
    await sleep(300);
    const load = loadavg().map((v) => v.toFixed(2)).join(' ');
    const results = new Map(subjects.map((s) => [s.label, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? subjects : [...subjects].reverse();
      for (const { label, subject } of order) {
        const result = await runForked(SCRIPT, { subject, port, durationMs, warmupMs });
        results.get(label).push(result);
        console.error(`round ${round + 1} ${label}: ${result.perSecond.toFixed(0)}/s p50 ${result.p50.toFixed(0)} p99 ${result.p99.toFixed(0)} µs, ${result.commandsPerCall.toFixed(2)} cmd ${result.redisUsPerCall.toFixed(1)} µs Redis/call, CPU µs/call client ${result.clientCpuUs.toFixed(1)} redis ${result.redisCpuUs.toFixed(1)}`);
      }
    }
    const peer = median(results.get('rlflex RateLimiterRedis').map((r) => r.perSecond));
    const peerP99 = median(results.get('rlflex RateLimiterRedis').map((r) => r.p99));
    console.log(`node bench/redis-lone.js ${argv.join(' ')} — ${cpus().length}× ${cpus()[0].model}, node ${process.version}, load average at start ${load}, now ${loadavg().map((v) => v.toFixed(2)).join(' ')}`);
    console.log('| subject | decisions/s | × peer | p50 µs | p99 µs | p99 ÷ peer | commands/call | Redis µs/call | client CPU µs/call | redis-server CPU µs/call |');
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const { label } of subjects) {
      const rows = results.get(label);
      const rate = median(rows.map((r) => r.perSecond));
      const p99 = median(rows.map((r) => r.p99));
      const cells = [label, rate.toFixed(0), (rate / peer).toFixed(2), median(rows.map((r) => r.p50)).toFixed(0), p99.toFixed(0), (p99 / peerP99).toFixed(2),
        median(rows.map((r) => r.commandsPerCall)).toFixed(2), median(rows.map((r) => r.redisUsPerCall)).toFixed(1),
        median(rows.map((r) => r.clientCpuUs)).toFixed(1), median(rows.map((r) => r.redisCpuUs)).toFixed(1)];
      console.log(`| ${cells.join(' | ')} |`);
    }
  } finally {
    redis.kill();
  }
}

forkedEntry(child, () => main(process.argv.slice(2)));
