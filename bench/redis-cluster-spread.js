// Spread keys on a 3-master Redis Cluster against one Redis (issue 32 item 4): Redis CPU per check,
// checks/s and latency, Tollgate before and after a change side by side, with rate-limiter-flexible's
// RateLimiterRedis (ioredis) as the peer, in one run.
//
//   npm run build && node bench/redis-cluster-spread.js [--before DIR] [--rounds 3] [--duration 4000]
//       [--warmup 1500] [--in-flight 64,256] [--keys 100000]
//
// --before DIR: a directory holding another build's dist/ (e.g. git main's, built in a temp copy);
// its subject is "before", this checkout's dist/ is "after". Starts, as child processes on free
// loopback ports killed by PID at the end (bench/support/redis.js): one redis-server and a 3-master
// Cluster (no replicas, no persistence). Each measurement runs in a fresh forked process: --in-flight
// async workers, each awaiting one fixed-window check at a time (limit 1e9 per hour: every check is
// admitted; Tollgate's deadline 5 s, breaker off, so the store answers every check) on keys cycling over --keys distinct keys (so on a Cluster nearly every check of a tick
// falls in its own hash slot); --warmup ms, then --duration ms timed. Around the timed part the
// parent reads INFO cpu and INFO commandstats of every master: Redis CPU per check (used_cpu_sys +
// used_cpu_user, summed over masters) and Redis usec per check (commandstats, script calls only).
// Rounds alternate the order of the measurements; the tables give medians and the ratios
// after/before and after/peer.
import { fork } from 'node:child_process';
import { join, dirname } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { rlflexSubject } from './support/rlflex.js';
import { redisCounters, redisDelta, removeRedisDirs, startRedisCluster, startRedisServer } from './support/redis.js';

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT = dirname(dirname(SCRIPT));
const require = createRequire(import.meta.url);
const SCRIPT_COMMANDS = ['evalsha', 'eval', 'fcall', 'fcall_ro'];

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

const argv = process.argv.slice(2);
const flag = (name, fallback) => {
  const at = argv.indexOf(`--${name}`);
  return at < 0 ? fallback : argv[at + 1];
};

if (flag('child', undefined) !== undefined) {
  await child(JSON.parse(flag('child')));
} else {
  await main();
}

async function makeSubject({ subject, topology, nodes, url, distDir }) {
  const clusterNodes = nodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) }));
  if (subject !== 'rlflex') {
    const { createLimiter, redisStore } = await import(pathToFileURL(join(distDir, 'index.js')).href);
    const store = redisStore(topology === 'cluster' ? { cluster: clusterNodes } : { url });
    await store.ready();
    // No answer from the failure mode: a long deadline and no breaker (a fallback answered at once
    // would also starve the event loop of this closed loop).
    const limiter = createLimiter({ store, deadlineMs: 5_000, breaker: false });
    const policy = { algorithm: 'fixed-window', limit: 1_000_000_000, window: 3_600_000 };
    return { decide: async (key) => (await limiter.limit(key, policy)).allowed, close: () => limiter.close() };
  }
  const { Redis, Cluster } = require('ioredis');
  return rlflexSubject(topology === 'cluster' ? new Cluster(clusterNodes) : new Redis(url), { points: 1_000_000_000, duration: 3600 });
}

async function child(job) {
  const subject = await makeSubject(job);
  let next = Math.floor(Math.random() * job.keys);
  let stop = false;
  let recording = false;
  let checks = 0;
  let denied = 0;
  const latencies = [];
  const worker = async () => {
    while (!stop) {
      const key = `k${next++ % job.keys}`;
      const started = performance.now();
      const allowed = await subject.decide(key);
      if (recording) {
        latencies.push(performance.now() - started);
        checks++;
        if (!allowed) denied++;
      }
    }
  };
  const workers = Array.from({ length: job.inFlight }, worker);
  await new Promise((resolve) => setTimeout(resolve, job.warmup));
  process.send({ phase: 'start' });
  await new Promise((resolve) => process.once('message', resolve));
  recording = true;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, job.duration));
  recording = false;
  const seconds = (performance.now() - started) / 1000;
  process.send({ phase: 'stop' });
  stop = true;
  await Promise.all(workers);
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] * 1000;
  process.send({ phase: 'done', checks, denied, seconds, p50: at(0.5), p99: at(0.99) });
  await subject.close();
  process.exit(0);
}

function measure(job, ports) {
  return new Promise((resolve, reject) => {
    const proc = fork(SCRIPT, ['--child', JSON.stringify(job)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let before;
    let delta;
    proc.on('message', (message) => {
      if (message.phase === 'start') {
        before = ports.map(redisCounters);
        proc.send('go');
      } else if (message.phase === 'stop') {
        delta = redisDelta(before, ports.map(redisCounters));
      } else if (message.phase === 'done') {
        const scriptCalls = SCRIPT_COMMANDS.reduce((sum, name) => sum + (delta.commands[name]?.calls ?? 0), 0);
        const scriptUsec = SCRIPT_COMMANDS.reduce((sum, name) => sum + (delta.commands[name]?.usec ?? 0), 0);
        resolve({
          ...job,
          checksPerSecond: message.checks / message.seconds,
          p50: message.p50,
          p99: message.p99,
          denied: message.denied,
          redisCpuUsPerCheck: (delta.cpuSeconds * 1e6) / message.checks,
          redisUsecPerCheck: scriptUsec / message.checks,
          callsPerCheck: scriptCalls / message.checks,
        });
      }
    });
    // A child that does not finish in time is stopped (by its PID) and the run fails.
    const watchdog = setTimeout(() => proc.kill('SIGKILL'), job.warmup + job.duration + 20_000);
    proc.on('exit', (code) => {
      clearTimeout(watchdog);
      if (code !== 0) reject(new Error(`child ${job.subject} ${job.topology} exited ${code}`));
    });
  });
}


async function main() {
  const rounds = Number(flag('rounds', '3'));
  const duration = Number(flag('duration', '4000'));
  const warmup = Number(flag('warmup', '1500'));
  const keys = Number(flag('keys', '100000'));
  const inFlights = flag('in-flight', '64,256').split(',').map(Number);
  const beforeDir = flag('before', undefined);
  const single = await startRedisServer('spread-single');
  const cluster = await startRedisCluster('spread-cluster', 3);
  const topologies = {
    single: { ports: [single.port] },
    cluster: { ports: cluster.servers.map((s) => s.port) },
  };
  const subjects = [...(beforeDir ? [['before', join(beforeDir, 'dist')]] : []), ['after', join(ROOT, 'dist')], ['rlflex', undefined]];
  const jobs = [];
  for (const inFlight of inFlights) {
    for (const topology of Object.keys(topologies)) {
      for (const [subject, distDir] of subjects) jobs.push({ subject, distDir, topology, inFlight, keys, warmup, duration, nodes: cluster.nodes, url: single.url });
    }
  }
  const samples = [];
  const loads = [loadavg()[0]];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? jobs : [...jobs].reverse();
    for (const job of order) {
      const sample = await measure(job, topologies[job.topology].ports);
      samples.push({ round, ...sample });
      console.error(`round ${round} ${job.topology} ${job.subject} x${job.inFlight}: ${Math.round(sample.checksPerSecond)}/s, Redis CPU ${sample.redisCpuUsPerCheck.toFixed(1)} µs/check, calls/check ${sample.callsPerCheck.toFixed(3)}`);
    }
    loads.push(loadavg()[0]);
  }
  console.log(`\nMachine: ${cpus().length}× ${cpus()[0].model}, Node ${process.version}; ${rounds} rounds × ${duration} ms (warm-up ${warmup} ms), ${keys} keys; load average (1 min) ${loads.map((l) => l.toFixed(2)).join(' → ')}\n`);
  console.log('| topology | in flight | subject | checks/s | p50 µs | p99 µs | Redis CPU µs/check [rounds] | Redis usec/check (commandstats) | script calls/check |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  const rows = {};
  for (const job of jobs) {
    const mine = samples.filter((s) => s.subject === job.subject && s.topology === job.topology && s.inFlight === job.inFlight);
    const row = (rows[`${job.topology}/${job.inFlight}/${job.subject}`] = {
      rate: median(mine.map((s) => s.checksPerSecond)),
      cpu: median(mine.map((s) => s.redisCpuUsPerCheck)),
    });
    console.log(
      `| ${job.topology} | ${job.inFlight} | ${job.subject} | ${Math.round(row.rate).toLocaleString('en-US')} | ${median(mine.map((s) => s.p50)).toFixed(0)} | ${median(mine.map((s) => s.p99)).toFixed(0)} | ${row.cpu.toFixed(1)} [${mine.map((s) => s.redisCpuUsPerCheck.toFixed(1)).join(', ')}] | ${median(mine.map((s) => s.redisUsecPerCheck)).toFixed(1)} | ${median(mine.map((s) => s.callsPerCheck)).toFixed(3)} |`,
    );
  }
  console.log('\nRatios of medians (Redis CPU per check: lower is better; checks/s: higher is better):\n');
  for (const inFlight of inFlights) {
    for (const topology of Object.keys(topologies)) {
      const r = (subject) => rows[`${topology}/${inFlight}/${subject}`];
      const parts = [];
      if (beforeDir) parts.push(`after/before: CPU ${(r('after').cpu / r('before').cpu).toFixed(2)}×, checks/s ${(r('after').rate / r('before').rate).toFixed(2)}×`);
      parts.push(`after/rlflex: CPU ${(r('after').cpu / r('rlflex').cpu).toFixed(2)}×, checks/s ${(r('after').rate / r('rlflex').rate).toFixed(2)}×`);
      console.log(`- ${topology}, ${inFlight} in flight: ${parts.join('; ')}`);
    }
    const a = (topology) => rows[`${topology}/${inFlight}/after`].cpu;
    console.log(`- ${inFlight} in flight, after: Cluster/single Redis CPU per check ${(a('cluster') / a('single')).toFixed(2)}×`);
  }
  removeRedisDirs();
  process.exit(0);
}
