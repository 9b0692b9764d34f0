// Concurrency slots on Redis: acquire+release pairs per second and Redis time per pair, side by
// side with a plain `limiter.limit()` decision, in one process on one private redis-server.
// `inFlight` async workers each loop: a pair (`await acquire`, `await permit.release()`) or a
// decision (`await limit`), over a pool of keys (limits high enough that everything is granted:
// checked). Subjects interleave in each repeat, the order reversed on odd repeats; medians.
// Redis time: `INFO commandstats` usec of every command, summed, around each timed window.
//
//   npm run build && node bench/concurrency-slots.js [--repeats 3] [--duration 2000] [--keys 1000]
//
// Writes bench/results/concurrency-slots.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLimiter, redisStore } from '../dist/index.js';
import { redisCounters, redisDelta, removeRedisDirs, startRedisServer } from './support/redis.js';
import { stopChild } from './support/children.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const REPEATS = option('repeats', 3);
const DURATION_MS = option('duration', 2000);
const KEYS = option('keys', 1000);
const IN_FLIGHT = [1, 64];
const SCRIPT_COMMANDS = new Set(['evalsha', 'eval', 'fcall', 'fcall_ro']);
const POLICY = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1h' };

const server = await startRedisServer('bench-slots');
const store = redisStore({ url: server.url, deadlineMs: 10_000 });
await store.ready();
const limiter = createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });

const SUBJECTS = {
  /** One acquire and its release: two script calls. */
  'acquire+release': async (key) => {
    const permit = await limiter.acquire(key, { limit: 100_000, ttl: '1m' });
    if (!permit.allowed) throw new Error('a slot was refused: the bench must grant every one');
    if (!(await permit.release())) throw new Error('a release freed nothing');
  },
  /** One decision: one script call (batched with the others of its tick). */
  'limit()': async (key) => {
    if (!(await limiter.limit(key, POLICY)).allowed) throw new Error('a decision was refused');
  },
};

async function measure(subject, inFlight) {
  const run = SUBJECTS[subject];
  let operations = 0;
  let stop = false;
  const worker = async (w) => {
    for (let i = w; !stop; i += inFlight) {
      await run(`bench:${i % KEYS}`);
      operations += 1;
    }
  };
  // Warm-up, then the timed window.
  const warm = Array.from({ length: inFlight }, (_, w) => worker(w));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const before = redisCounters(server.port);
  const counted = operations;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, DURATION_MS));
  const elapsed = performance.now() - started;
  const done = operations - counted;
  const after = redisCounters(server.port);
  stop = true;
  await Promise.all(warm);
  const { commands } = redisDelta([before], [after]);
  // A script's usec includes the commands it runs (listed apart too): count the script calls only.
  const scripts = Object.entries(commands).filter(([name]) => SCRIPT_COMMANDS.has(name)).map(([, c]) => c);
  const usec = scripts.reduce((sum, c) => sum + c.usec, 0);
  const calls = scripts.reduce((sum, c) => sum + c.calls, 0);
  return { perSecond: (done * 1000) / elapsed, redisUsecPerOp: usec / done, redisCallsPerOp: calls / done };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const samples = {};
for (let repeat = 0; repeat < REPEATS; repeat++) {
  for (const inFlight of IN_FLIGHT) {
    const order = repeat % 2 === 0 ? Object.keys(SUBJECTS) : Object.keys(SUBJECTS).reverse();
    for (const subject of order) (samples[`${inFlight}|${subject}`] ??= []).push(await measure(subject, inFlight));
  }
}

const rows = [];
for (const inFlight of IN_FLIGHT) {
  const of = (subject, field) => median(samples[`${inFlight}|${subject}`].map((s) => s[field]));
  const plain = of('limit()', 'perSecond');
  for (const subject of Object.keys(SUBJECTS)) {
    rows.push({ inFlight, subject, perSecond: Math.round(of(subject, 'perSecond')), ratio: of(subject, 'perSecond') / plain, redisUsecPerOp: of(subject, 'redisUsecPerOp'), redisCallsPerOp: of(subject, 'redisCallsPerOp') });
  }
}
console.log('| in flight | subject | per second | × limit() | Redis µs per op | script calls per op |');
console.log('|---:|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.inFlight} | ${r.subject} | ${r.perSecond.toLocaleString('en-US')} | ${r.ratio.toFixed(2)} | ${r.redisUsecPerOp.toFixed(1)} | ${r.redisCallsPerOp.toFixed(3)} |`);
mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(join(ROOT, 'bench', 'results', 'concurrency-slots.json'), JSON.stringify({ at: new Date().toISOString(), repeats: REPEATS, durationMs: DURATION_MS, keys: KEYS, samples, rows }, null, 2));
await limiter.close();
await stopChild(server.child);
removeRedisDirs();
