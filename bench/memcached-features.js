// Concurrency slots, reserve then settle and penalties on the Memcached store (issue 29), side by
// side with a plain `limiter.limit()` decision, in one process on one private memcached.
// `inFlight` async workers each loop over a pool of keys: a pair (`await acquire` then
// `await permit.release()`; `await reserve` then `await settle`) or a decision (`await limit`),
// with limits high enough that everything is granted (checked). Subjects interleave in each
// repeat, the order reversed on odd repeats; medians. Memcached commands per operation: the
// server's `stats` (get_*, cmd_set: set/add/cas, incr/decr) around each timed window.
//
//   npm run build && node bench/memcached-features.js [--repeats 3] [--duration 2000] [--keys 1000]
//
// The bench starts its own memcached (a child on a free loopback port) and stops it by its PID.
// Writes bench/results/memcached-features.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createLimiter, memcachedStore } from '../dist/index.js';
import { freePort, startChild, stopChild, waitForPort } from './support/children.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const REPEATS = option('repeats', 3);
const DURATION_MS = option('duration', 2000);
const KEYS = option('keys', 1000);
const IN_FLIGHT = [1, 64];
// High enough that every call is granted, low enough for reserve/settle's bound ((3 × capacity + 1) × window ≤ 2^53).
const HIGH = 1_000_000;
const BUCKET = { algorithm: 'token-bucket', limit: HIGH, window: '1h' };
const WINDOW = { algorithm: 'fixed-window', limit: HIGH, window: '1h' };
const BLOCKED_BUCKET = { ...BUCKET, blockDuration: '1m' };

const port = await freePort();
const user = process.getuid?.() === 0 ? ['-u', 'root'] : [];
const server = startChild('memcached', 'memcached', ['-p', String(port), '-l', '127.0.0.1', '-U', '0', '-m', '256', '-t', '1', ...user]);
await waitForPort(server, port);
const store = memcachedStore({ servers: `127.0.0.1:${port}`, commandTimeoutMs: 10_000, connectTimeoutMs: 10_000 });
await store.ready();
const limiter = createLimiter({ store, deadlineMs: 10_000, failureMode: 'throw' });
let ids = 0;

const granted = (decision) => {
  if (!decision.allowed) throw new Error('refused: the bench must grant every call');
};
const SUBJECTS = {
  /** A plain decision by compare-and-set (one gets, one cas). */
  'limit() token-bucket': async (key) => granted(await limiter.limit(key, BUCKET)),
  /** A plain decision by incr (the aligned fixed window). */
  'limit() fixed-window': async (key) => granted(await limiter.limit(key, WINDOW)),
  /** A decision with a penalty: the block rides in the state's item. */
  'limit() token-bucket + blockDuration': async (key) => granted(await limiter.limit(key, BLOCKED_BUCKET)),
  /** One acquire and its release: two compare-and-set steps on the key's holders item. */
  'acquire+release': async (key) => {
    const permit = await limiter.acquire(key, { limit: 5_000, ttl: '1m' });
    granted(permit);
    if (!(await permit.release())) throw new Error('a release freed nothing');
  },
  /** One reserve and its settle (token bucket): two compare-and-set steps on the key's state item. */
  'reserve+settle': async (key) => {
    const id = `r${(ids += 1)}`;
    granted(await limiter.reserve(key, BUCKET, { id, cost: 10, ttl: 60_000 }));
    const { status } = await limiter.settle(key, BUCKET, { id, cost: 3 });
    if (status !== 'settled') throw new Error(`a settle answered ${status}, not settled`);
  },
};

/** memcached's command counters now. */
function serverCounts() {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('error', reject);
    socket.on('connect', () => socket.write('stats\r\n'));
    socket.on('data', (chunk) => {
      text += chunk;
      if (!text.endsWith('END\r\n')) return;
      socket.destroy();
      const stat = (name) => Number(new RegExp(`STAT ${name} (\\d+)`).exec(text)?.[1] ?? 0);
      resolve(stat('cmd_get') + stat('cmd_set') + stat('incr_hits') + stat('incr_misses') + stat('decr_hits') + stat('decr_misses') + stat('delete_hits') + stat('delete_misses'));
    });
  });
}

async function measure(subject, inFlight) {
  const run = SUBJECTS[subject];
  const prefix = `bench:${subject}:${inFlight}:${Math.random().toString(36).slice(2)}`;
  let operations = 0;
  let stop = false;
  const worker = async (w) => {
    for (let i = w; !stop; i += inFlight) {
      await run(`${prefix}:${i % KEYS}`);
      operations += 1;
    }
  };
  const warm = Array.from({ length: inFlight }, (_, w) => worker(w));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const before = await serverCounts();
  const counted = operations;
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, DURATION_MS));
  const elapsed = performance.now() - started;
  const done = operations - counted;
  const after = await serverCounts();
  stop = true;
  await Promise.all(warm);
  return { perSecond: (done * 1000) / elapsed, commandsPerOp: (after - before) / done };
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const samples = {};
const loadBefore = loadavg()[0];
try {
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const inFlight of IN_FLIGHT) {
      const order = repeat % 2 === 0 ? Object.keys(SUBJECTS) : Object.keys(SUBJECTS).reverse();
      for (const subject of order) {
        const sample = await measure(subject, inFlight);
        (samples[`${inFlight}|${subject}`] ??= []).push(sample);
        console.error(`repeat ${repeat + 1} ${String(inFlight).padStart(2)} in flight ${subject.padEnd(38)} ${Math.round(sample.perSecond)}/s`);
      }
    }
  }
} finally {
  await limiter.close();
  await stopChild(server);
}

const rows = [];
for (const inFlight of IN_FLIGHT) {
  const of = (subject, field) => median(samples[`${inFlight}|${subject}`].map((s) => s[field]));
  const plain = of('limit() token-bucket', 'perSecond');
  for (const subject of Object.keys(SUBJECTS)) rows.push({ inFlight, subject, perSecond: Math.round(of(subject, 'perSecond')), ratio: of(subject, 'perSecond') / plain, commandsPerOp: of(subject, 'commandsPerOp') });
}
console.log(`load average ${loadBefore.toFixed(2)} before, ${loadavg()[0].toFixed(2)} after`);
console.log('| in flight | subject | per second | × limit() token-bucket | memcached commands per op |');
console.log('|---:|---|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.inFlight} | ${r.subject} | ${r.perSecond.toLocaleString('en-US')} | ${r.ratio.toFixed(2)} | ${r.commandsPerOp.toFixed(2)} |`);
mkdirSync(join(ROOT, 'bench', 'results'), { recursive: true });
writeFileSync(join(ROOT, 'bench', 'results', 'memcached-features.json'), JSON.stringify({ at: new Date().toISOString(), repeats: REPEATS, durationMs: DURATION_MS, keys: KEYS, samples, rows }, null, 2));
