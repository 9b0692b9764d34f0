// The promise API on the memory store, one hot key: CPU ns and bytes allocated per `limiter.limit()`
// call, two builds side by side (and `limitSync` as the floor of the same store).
//
//   node bench/limit-promise-inprocess.js DIST_A DIST_B [--rounds 11] [--batches 400] [--algorithm token-bucket]
//
// The harness is bench/memory-store.js's: batches of 1,000 calls on one key awaited with
// Promise.all. Each round runs each build in a fresh child process (two builds in one process share
// builtins' feedback and skew each other), which warms up, then measures: CPU time
// (process.cpuUsage) over `batches` batches, and the heap grown by one batch with no collection in
// between (the child runs with a semi-space large enough that no scavenge falls inside a batch).
// A and B alternate which goes first. Prints medians per build and the median [min – max] of the
// per-round ratio B ÷ A.
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : argv[index + 1];
};
const dists = argv.filter((arg, i) => !arg.startsWith('--') && (i === 0 || !argv[i - 1].startsWith('--')));
const CHILD = option('child', undefined);
if (CHILD === undefined && dists.length !== 2) {
  console.error('usage: node bench/limit-promise-inprocess.js DIST_A DIST_B [--rounds N] [--batches N] [--algorithm A]');
  process.exit(2);
}
const ROUNDS = Number(option('rounds', 11));
const BATCHES = Number(option('batches', 400));
const ALGORITHM = option('algorithm', 'token-bucket');
const BATCH = 1_000;
const KEY = 'user:42';

/** The limiter and policy of the build in `dist`. */
async function subjectOf(dist) {
  const { createLimiter, memoryStore } = await import(pathToFileURL(resolve(dist, 'index.js')).href);
  const limiter = createLimiter({ store: memoryStore({ maxKeys: 2_000_000, sweepIntervalMs: 0 }) });
  return { dist, limiter, policy: { algorithm: ALGORITHM, limit: 1_000_000_000, window: 3_600_000 } };
}

async function batch({ limiter, policy }) {
  const calls = new Array(BATCH);
  for (let i = 0; i < BATCH; i++) calls[i] = limiter.limit(KEY, policy);
  const results = await Promise.all(calls);
  let admitted = 0;
  for (let i = 0; i < BATCH; i++) if (results[i].allowed) admitted++;
  if (admitted !== BATCH) throw new Error(`${admitted} of ${BATCH} admitted`);
}

function syncBatch({ limiter, policy }) {
  let admitted = 0;
  for (let i = 0; i < BATCH; i++) if (limiter.limitSync(KEY, policy).allowed) admitted++;
  if (admitted !== BATCH) throw new Error(`${admitted} of ${BATCH} admitted`);
}

/** CPU ns per call over BATCHES batches. */
async function cpuPerCall(subject, sync) {
  const cpu0 = process.cpuUsage();
  for (let b = 0; b < BATCHES; b++) {
    if (sync) {
      syncBatch(subject);
      await undefined;
    } else await batch(subject);
  }
  const cpu = process.cpuUsage(cpu0);
  return ((cpu.user + cpu.system) * 1000) / (BATCHES * BATCH);
}

/** Bytes the heap grew by per call over one batch, the median of 9 batches each started after a gc. */
async function bytesPerCall(subject, sync) {
  const samples = [];
  for (let i = 0; i < 9; i++) {
    global.gc();
    const before = process.memoryUsage().heapUsed;
    if (sync) syncBatch(subject);
    else await batch(subject);
    samples.push((process.memoryUsage().heapUsed - before) / BATCH);
  }
  return median(samples);
}

function median(values) {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** One build's figures, in this (child) process: warm-up first, then each figure. */
async function measure(dist) {
  const subject = await subjectOf(dist);
  await cpuPerCall(subject, false);
  await cpuPerCall(subject, true);
  return { ns: await cpuPerCall(subject, false), bytes: await bytesPerCall(subject, false), syncNs: await cpuPerCall(subject, true), syncBytes: await bytesPerCall(subject, true) };
}

if (CHILD !== undefined) {
  console.log(JSON.stringify(await measure(CHILD)));
} else {
  const child = (dist) =>
    JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--max-semi-space-size=64', fileURLToPath(import.meta.url), '--child', dist, '--batches', String(BATCHES), '--algorithm', ALGORITHM], { encoding: 'utf8' }).trim().split('\n').at(-1));
  const load0 = loadavg();
  const rows = dists.map(() => ({ ns: [], bytes: [], syncNs: [], syncBytes: [] }));
  const ratios = { ns: [], bytes: [], syncNs: [] };
  for (let r = 0; r < ROUNDS; r++) {
    const round = [];
    for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) round[i] = child(dists[i]);
    for (const i of [0, 1]) for (const field of ['ns', 'bytes', 'syncNs', 'syncBytes']) rows[i][field].push(round[i][field]);
    ratios.ns.push(round[1].ns / round[0].ns);
    ratios.bytes.push(round[1].bytes / round[0].bytes);
    ratios.syncNs.push(round[1].syncNs / round[0].syncNs);
  }
  const range = (values) => `${median(values).toFixed(3)} [${Math.min(...values).toFixed(3)} – ${Math.max(...values).toFixed(3)}]`;
  console.log(`${ALGORITHM}, one hot key, ${ROUNDS} rounds of ${BATCHES} × ${BATCH} calls; load ${load0.map((v) => v.toFixed(1)).join(' ')} before, ${loadavg().map((v) => v.toFixed(1)).join(' ')} after`);
  console.log('| build | limit() CPU ns/call | limit() B/call | limitSync CPU ns/call | limitSync B/call |');
  console.log('|---|---:|---:|---:|---:|');
  dists.forEach((dist, i) => {
    const row = rows[i];
    console.log(`| ${dist} | ${median(row.ns).toFixed(1)} | ${median(row.bytes).toFixed(1)} | ${median(row.syncNs).toFixed(1)} | ${median(row.syncBytes).toFixed(1)} |`);
  });
  console.log(`B ÷ A: limit() CPU ${range(ratios.ns)}, bytes ${range(ratios.bytes)}; limitSync CPU ${range(ratios.syncNs)}`);
}
