// Client CPU per lone Redis decision, several builds side by side: each round runs every build in
// a fresh forked child (the order rotating from round to round) doing N sequential
// `await limiter.limit()` (fixed-window or token-bucket, 10,000 keys, a 10 s limiter deadline so
// the failure mode never answers) on one private redis-server; medians, and ratios to the first
// build paired round by round (the machine's load moves both members of a pair alike).
//
//   npm run build && node bench/redis-lone-cpu.js /tmp/base/dist dist [more dists] [--rounds 15] [--n 20000] [--algorithm token-bucket]
//
// Allocation, independent of the load: `node --trace-gc` over the child's loop counts scavenges.
// The redis-server is a child of this script (free loopback port, no persistence), killed by its PID.
import { spawn, fork } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './support/children.js';

const SCRIPT = fileURLToPath(import.meta.url);
const KEYS = 10_000;
const WARMUP = 5_000;

if (process.argv[2] === '--child') {
  const [dist, port, algorithm, n] = process.argv.slice(3);
  const { createLimiter, redisStore } = await import(pathToFileURL(join(dist, 'index.js')).href);
  const store = redisStore({ url: `redis://127.0.0.1:${port}`, keyPrefix: `cpu${process.pid}:` });
  await store.ready();
  const limiter = createLimiter({ store, deadlineMs: 10_000 });
  const policy = { algorithm, limit: 1_000_000_000, window: 60_000 };
  for (let i = 0; i < WARMUP; i++) await limiter.limit(`k${i % KEYS}`, policy);
  const calls = Number(n);
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let i = 0; i < calls; i++) await limiter.limit(`k${i % KEYS}`, policy);
  const wallUs = ((performance.now() - started) * 1000) / calls;
  const used = process.cpuUsage(cpu);
  process.send({ cpuUs: (used.user + used.system) / calls, wallUs });
  await limiter.close();
  process.exit(0);
}

const args = process.argv.slice(2);
function option(name, fallback) {
  const index = args.indexOf(`--${name}`);
  return index === -1 ? fallback : args.splice(index, 2)[1];
}
const rounds = Number(option('rounds', '15'));
const n = option('n', '20000');
const algorithm = option('algorithm', 'fixed-window');
const dists = args;
if (dists.length === 0) {
  console.error('usage: node bench/redis-lone-cpu.js <dist> [<dist> ...] [--rounds N] [--n calls] [--algorithm name]');
  process.exit(1);
}
const port = await freePort();
const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
try {
  await sleep(300);
  const run = (dist) =>
    new Promise((resolve, reject) => {
      const child = fork(SCRIPT, ['--child', dist, String(port), algorithm, n]);
      child.once('message', resolve);
      child.once('exit', (code) => code !== 0 && reject(new Error(`child for ${dist} exited with ${code}`)));
    });
  const results = dists.map(() => []);
  for (let round = 0; round < rounds; round++) {
    for (let j = 0; j < dists.length; j++) {
      const k = (j + round) % dists.length;
      results[k][round] = await run(dists[k]);
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  for (const [k, dist] of dists.entries()) {
    const cpu = median(results[k].map((r) => r.cpuUs));
    const cpuRatio = median(results[k].map((r, round) => r.cpuUs / results[0][round].cpuUs));
    const wall = median(results[k].map((r) => r.wallUs));
    const wallRatio = median(results[k].map((r, round) => r.wallUs / results[0][round].wallUs));
    console.log(`${algorithm} ${dist}: client CPU ${cpu.toFixed(2)} µs/decision (×first, paired ${cpuRatio.toFixed(3)}), wall ${wall.toFixed(1)} µs (×first ${wallRatio.toFixed(3)})`);
  }
} finally {
  redis.kill();
}
