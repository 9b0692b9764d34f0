// Tollgate's memory store against rate-limiter-flexible's RateLimiterMemory, in one run.
//
//   npm run bench          (builds dist/, then runs this file)
//   node --expose-gc bench/memory-store.js [--repeats N] [--memory-repeats N] [--duration MS]
//
// Every measurement runs in a fresh child process (a fork of this file with `--child <spec>`), so
// heaps and JIT state never leak from one measurement into the next. Runs are interleaved: each
// repeat runs every subject once, alternating the order, and the median of the repeats is reported.
//
// Method (the peer's published method): calls are issued in batches of 1,000 and each batch is
// awaited with Promise.all. Each child warms up on the same code path before measuring.
//
// A single measurement can be run on its own; it prints its result as JSON. With "profile" it also
// CPU-profiles the timed part only (summarise with bench/profile-top.js):
//   node --expose-gc bench/memory-store.js --child '{"scenario":"hot-admitted","subject":"token-bucket","profile":"/tmp/tb.cpuprofile"}'
// Scenarios: hot-admitted, hot-rejected, many-keys, memory, log-memory; subjects: the six algorithm
// names (Tollgate's promise API, `limiter.limit`), the same with "-sync" (`limiter.limitSync`, no
// promise: a batch is a plain loop, then one await) and "rlflex" (the peer).
import { execFileSync, fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, freemem, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createRequire } from 'node:module';

const SCRIPT = fileURLToPath(import.meta.url);
const HERE = dirname(SCRIPT);
const ROOT = dirname(HERE);
const require = createRequire(import.meta.url);

const ALGORITHMS = ['token-bucket', 'leaky-bucket', 'fixed-window', 'sliding-log', 'sliding-window', 'gcra'];
const PEER = 'rlflex';
const PEER_LABEL = 'rate-limiter-flexible RateLimiterMemory';
const SUBJECTS = [...ALGORITHMS, PEER];
/** Tollgate's synchronous API (`limiter.limitSync`), throughput scenarios only (the store is the same). */
const SYNC = '-sync';
const SYNC_SUBJECTS = ALGORITHMS.map((algorithm) => `${algorithm}${SYNC}`);
const THROUGHPUT_SUBJECTS = [...ALGORITHMS, ...SYNC_SUBJECTS, PEER];
const BATCH = 1_000;
const HOUR_MS = 3_600_000;
const MANY_KEYS = 1_000_000;
const MAX_KEYS = 2_000_000;
/** A realistic long key: a SHA-256 hex digest, as docs advise for long identities (70 chars). */
const LONG_KEY = `token:${createHash('sha256').update('user:42').digest('hex')}`;
/** Subjects of the long-key sensitivity run (key hashing cost does not depend on the algorithm). */
const LONG_KEY_SUBJECTS = ['token-bucket', PEER];

// ---------------------------------------------------------------------------------------------
// Subjects: a uniform `decide(key) → Promise<boolean>`-ish interface over both libraries, where the
// batch runner reads the outcome without adding work on the Tollgate side.
// ---------------------------------------------------------------------------------------------

async function makeSubject(subject, { limit, windowMs, distDir, window, timeZone }) {
  if (subject === PEER || subject === `${PEER}-nohandler`) {
    const { RateLimiterMemory, RateLimiterRes } = require('rate-limiter-flexible');
    const rl = new RateLimiterMemory({ points: limit, duration: windowMs / 1000 });
    // consume() rejects (with a RateLimiterRes, not an Error) to deny: a caller must handle that.
    const admitted = () => true;
    const denied = (res) => {
      if (!(res instanceof RateLimiterRes)) throw res;
      return false;
    };
    if (subject === PEER) {
      return { call: (key) => rl.consume(key, 1).then(admitted, denied), allowedOf: (v) => v };
    }
    // Only valid while nothing is denied: Promise.all rejects (and the run fails) otherwise.
    return { call: (key) => rl.consume(key, 1), allowedOf: () => true };
  }
  // distDir: the snapshot of dist/ taken when the run started (see main), so a rebuild during the
  // run cannot change the code under test half-way.
  const { createLimiter, memoryStore } = await import(pathToFileURL(join(distDir ?? join(ROOT, 'dist'), 'index.js')).href);
  const limiter = createLimiter({ store: memoryStore({ maxKeys: MAX_KEYS, sweepIntervalMs: 0 }) });
  const sync = subject.endsWith(SYNC);
  // One policy object reused by every call, as an application would hold it.
  // `window` and `timeZone` (a child's spec only): a calendar window, e.g. {"window":"day","timeZone":"Europe/Paris"}.
  const policy = { algorithm: sync ? subject.slice(0, -SYNC.length) : subject, limit, window: window ?? windowMs, ...(timeZone === undefined ? {} : { timeZone }) };
  if (sync) return { call: (key) => limiter.limitSync(key, policy), allowedOf: (d) => d.allowed, limiter, policy, sync };
  return { call: (key) => limiter.limit(key, policy), allowedOf: (d) => d.allowed, limiter, policy };
}

/** One batch of BATCH calls on one key, awaited together; returns how many were admitted. */
async function hotBatch(s, key) {
  if (s.sync) {
    let admitted = 0;
    for (let i = 0; i < BATCH; i++) if (s.allowedOf(s.call(key))) admitted++;
    return admitted;
  }
  const calls = new Array(BATCH);
  for (let i = 0; i < BATCH; i++) calls[i] = s.call(key);
  const results = await Promise.all(calls);
  let admitted = 0;
  for (let i = 0; i < BATCH; i++) if (s.allowedOf(results[i])) admitted++;
  return admitted;
}

/** One batch over keys[from, from + BATCH), awaited together; returns how many were admitted. */
async function keysBatch(s, keyAt, from) {
  if (s.sync) {
    let admitted = 0;
    for (let i = 0; i < BATCH; i++) if (s.allowedOf(s.call(keyAt(from + i)))) admitted++;
    return admitted;
  }
  const calls = new Array(BATCH);
  for (let i = 0; i < BATCH; i++) calls[i] = s.call(keyAt(from + i));
  const results = await Promise.all(calls);
  let admitted = 0;
  for (let i = 0; i < BATCH; i++) if (s.allowedOf(results[i])) admitted++;
  return admitted;
}

/**
 * With `spec.profile` (a file path), CPU-profiles only the timed part of a measurement (not key
 * building, warm-up or forced gc) and writes a .cpuprofile for bench/profile-top.js.
 */
async function startProfile(spec) {
  if (spec.profile === undefined) return async () => {};
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(spec.profile, JSON.stringify(profile));
    session.disconnect();
  };
}

async function settleGc() {
  for (let i = 0; i < 4; i++) {
    global.gc();
    await nextTurn();
  }
}

// ---------------------------------------------------------------------------------------------
// Measurements (each runs inside a child process)
// ---------------------------------------------------------------------------------------------

/** Decisions/s on one key for `durationMs`, after `warmupMs` on the same key and code path. */
async function hotKey(spec, expectAdmitted) {
  // Admitted: 1e9 per hour, far more than any run can issue (checked below). Rejected: 1 per hour.
  const limit = expectAdmitted ? 1_000_000_000 : 1;
  const s = await makeSubject(spec.subject, { limit, windowMs: HOUR_MS, distDir: spec.distDir, window: spec.window, timeZone: spec.timeZone });
  const key = spec.longKey ? LONG_KEY : 'user:42';
  if (!expectAdmitted) {
    // The one admitted request; everything after it is denied.
    if ((await hotBatch(s, key)) !== 1) throw new Error('hot-rejected: expected exactly the first request admitted');
  }
  const expected = expectAdmitted ? BATCH : 0;
  const runFor = async (ms) => {
    let decisions = 0;
    const start = performance.now();
    let elapsed;
    do {
      const admitted = await hotBatch(s, key);
      if (admitted !== expected) throw new Error(`${spec.scenario}/${spec.subject}: ${admitted} of ${BATCH} admitted, expected ${expected}`);
      decisions += BATCH;
      elapsed = performance.now() - start;
    } while (elapsed < ms);
    return { decisions, elapsed };
  };
  await runFor(spec.warmupMs);
  await settleGc();
  const stopProfile = await startProfile(spec);
  const cpu0 = process.cpuUsage();
  const { decisions, elapsed } = await runFor(spec.durationMs);
  const cpu = process.cpuUsage(cpu0);
  await stopProfile();
  return { opsPerSec: (decisions / elapsed) * 1000, decisions, ms: elapsed, ...perCpu(decisions, cpu) };
}

/** Decisions/s over MANY_KEYS distinct new keys, each used once (all admitted). */
async function manyKeys(spec) {
  const count = spec.keys;
  // Keys are built before timing so the figure is the limiter's work, not string building.
  const keys = new Array(count);
  for (let i = 0; i < count; i++) keys[i] = `user:${i}`;
  const keyAt = (i) => keys[i];
  // Warm up on a separate limiter and separate keys, then measure on a fresh one.
  {
    const warm = await makeSubject(spec.subject, { limit: 10, windowMs: HOUR_MS, distDir: spec.distDir });
    const warmKeys = spec.warmupKeys;
    const warmKeyAt = (i) => `warm:${i}`;
    for (let from = 0; from < warmKeys; from += BATCH) {
      if ((await keysBatch(warm, warmKeyAt, from)) !== BATCH) throw new Error('many-keys warm-up: a new key was denied');
    }
  }
  const s = await makeSubject(spec.subject, { limit: 10, windowMs: HOUR_MS, distDir: spec.distDir });
  await settleGc();
  const stopProfile = await startProfile(spec);
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const hourAtStart = Math.floor(Date.now() / HOUR_MS);
  for (let from = 0; from < count; from += BATCH) {
    if ((await keysBatch(s, keyAt, from)) !== BATCH) throw new Error('many-keys: a new key was denied');
  }
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  await stopProfile();
  // An aligned fixed window that rolled over mid-run (the clock crossed a whole hour) let the first
  // window's keys go: only a run inside one hour must hold every key.
  const sameHour = Math.floor(Date.now() / HOUR_MS) === hourAtStart;
  if (s.limiter !== undefined && sameHour && s.limiter.store.stats().keys !== count) throw new Error('many-keys: store does not hold every key');
  return { opsPerSec: (count / elapsed) * 1000, decisions: count, ms: elapsed, ...perCpu(count, cpu) };
}

/**
 * Decisions per second of this process's CPU time (all its threads, GC helpers included) during the
 * timed part: less sensitive than the wall-clock rate to other processes taking the CPU meanwhile.
 */
function perCpu(decisions, cpu) {
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return { timedCpuMs: cpuMs, opsPerCpuSec: (decisions / cpuMs) * 1000 };
}

/**
 * Heap per key: gc, read memoryUsage, insert `keys` keys (built on the fly, kept alive only by the
 * limiter), gc, read again. `entries` > 1 logs that many requests per key (distinct ms each).
 */
async function memory(spec) {
  const { keys: count, entries, limit } = spec;
  let holder;
  let call;
  if (spec.subject === 'map') {
    // Reference floor: the same key strings in a bare Map<string, number>.
    const map = new Map();
    holder = map;
    call = (key) => Promise.resolve(map.set(key, 1) && true);
  } else if (spec.subject === 'strings') {
    // Reference: the key strings alone, held by a plain array.
    const strings = [];
    holder = strings;
    call = (key) => Promise.resolve(strings.push(key) > 0);
  } else {
    const s = await makeSubject(spec.subject, { limit, windowMs: HOUR_MS, distDir: spec.distDir });
    holder = s;
    if (entries === 1 || s.limiter === undefined) {
      call = (key) => s.call(key);
    } else {
      let now = 0;
      call = (key) => s.limiter.limit(key, s.policy, { now });
      s.setNow = (t) => (now = t);
    }
    // One decision first so one-off structures (the policy cache, the key map) predate the baseline.
    await s.call('baseline:0');
  }
  const allowedOf = holder.allowedOf ?? ((v) => v);
  const subject = { call, allowedOf };
  await settleGc();
  const before = process.memoryUsage();
  const base = Date.now();
  for (let entry = 0; entry < entries; entry++) {
    if (holder.setNow !== undefined) holder.setNow(base + entry);
    for (let from = 0; from < count; from += BATCH) {
      if ((await keysBatch(subject, (i) => `user:${i}`, from)) !== BATCH) throw new Error('memory: a request was denied');
    }
  }
  await settleGc();
  const after = process.memoryUsage();
  if (holder.limiter !== undefined) {
    const stats = holder.limiter.store.stats();
    if (stats.keys !== count + 1 || stats.evictions !== 0) throw new Error(`memory: store holds ${stats.keys} keys, ${stats.evictions} evictions`);
  }
  const heap = after.heapUsed - before.heapUsed;
  const arrayBuffers = after.arrayBuffers - before.arrayBuffers;
  // Keep the limiter reachable until after the last reading.
  if (holder === undefined) throw new Error('unreachable');
  return {
    keys: count,
    entries,
    heapPerKey: heap / count,
    arrayBuffersPerKey: arrayBuffers / count,
    totalPerKey: (heap + arrayBuffers) / count,
    rssPerKey: (after.rss - before.rss) / count,
  };
}

async function runChild(spec) {
  switch (spec.scenario) {
    case 'hot-admitted':
      return hotKey(spec, true);
    case 'hot-admitted-long-key':
      return hotKey({ ...spec, longKey: true }, true);
    case 'hot-rejected':
      return hotKey(spec, false);
    case 'many-keys':
      return manyKeys(spec);
    case 'memory':
    case 'log-memory':
      return memory(spec);
    default:
      throw new Error(`unknown scenario ${spec.scenario}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Parent: schedule, aggregate, report
// ---------------------------------------------------------------------------------------------

/** Jiffies the whole machine spent busy (user, nice, system, irq, softirq) and stolen, or undefined off Linux. */
function machineCpu() {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = fields;
    return { busy: user + nice + system + irq + softirq, steal: steal ?? 0 };
  } catch {
    return undefined;
  }
}
const JIFFY_MS = 10; // USER_HZ is 100 on Linux

/**
 * Runs one child and measures how much CPU the rest of the machine used meanwhile ("foreign" CPU:
 * machine busy time minus the child's own). Another busy process on a 2-core box skews a figure
 * by tens of percent, so a sample taken alongside one is re-run (up to `attempts` times) and, if
 * never clean, kept with the least foreign CPU and flagged.
 */
async function measure(spec, attempts) {
  let best;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const cpu0 = machineCpu();
    const own0 = process.cpuUsage();
    const t0 = performance.now();
    const result = await spawnChild(spec);
    const wallMs = performance.now() - t0;
    const own = process.cpuUsage(own0);
    const cpu1 = machineCpu();
    let foreignCores = 0;
    let stealCores = 0;
    if (cpu0 !== undefined && cpu1 !== undefined) {
      const busyMs = (cpu1.busy - cpu0.busy) * JIFFY_MS;
      // Neither the child nor this parent (fork, IPC) is foreign.
      foreignCores = Math.max(0, busyMs - result.cpuMs - (own.user + own.system) / 1000) / wallMs;
      stealCores = ((cpu1.steal - cpu0.steal) * JIFFY_MS) / wallMs;
    }
    const sample = { ...result, wallMs, foreignCores, stealCores, attempt };
    if (best === undefined || foreignCores < best.foreignCores) best = sample;
    if (foreignCores <= FOREIGN_CPU_LIMIT || attempt === attempts) break;
    process.stderr.write(`  busy machine: ${foreignCores.toFixed(2)} cores used by other processes during ${spec.scenario} ${spec.subject}; `);
    const waited = await waitForQuiet();
    process.stderr.write(`waited ${(waited / 1000).toFixed(1)} s for quiet, re-running\n`);
  }
  return { ...best, contaminated: best.foreignCores > FOREIGN_CPU_LIMIT };
}
/** Average cores of other processes' CPU tolerated during a sample (an idle box shows ~0.05). */
const FOREIGN_CPU_LIMIT = 0.1;
/** Longest wait for a quiet machine before one re-run, and over the whole run. */
const QUIET_WAIT_MS = 30_000;
let quietBudgetMs = 180_000;

/** Waits (within the budgets) until the machine has been idle for two consecutive 500 ms windows. */
async function waitForQuiet() {
  const start = performance.now();
  let quietWindows = 0;
  while (quietWindows < 2 && performance.now() - start < Math.min(QUIET_WAIT_MS, quietBudgetMs)) {
    const cpu0 = machineCpu();
    if (cpu0 === undefined) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const busyCores = ((machineCpu().busy - cpu0.busy) * JIFFY_MS) / 500;
    quietWindows = busyCores <= FOREIGN_CPU_LIMIT ? quietWindows + 1 : 0;
  }
  const waited = performance.now() - start;
  quietBudgetMs = Math.max(0, quietBudgetMs - waited);
  return waited;
}

function spawnChild(spec) {
  return new Promise((resolve, reject) => {
    const child = fork(SCRIPT, ['--child', JSON.stringify(spec)], { execArgv: ['--expose-gc'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result;
    child.on('message', (message) => (result = message));
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code === 0 && result !== undefined && result.error === undefined) resolve(result);
      else reject(new Error(`child ${JSON.stringify(spec)} failed (exit ${code}): ${result?.error ?? 'no result'}`));
    });
  });
}

/** Hash of every file under `dir` (relative path + content), in a stable order. */
function hashTree(dir) {
  const hash = createHash('sha256');
  const walk = (at) => {
    for (const entry of readdirSync(at, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else hash.update(`${relative(dir, path)}\0`).update(readFileSync(path)).update('\0');
    }
  };
  walk(dir);
  return hash.digest('hex');
}

function snapshotDist() {
  const dist = join(ROOT, 'dist');
  const snapshot = mkdtempSync(join(tmpdir(), 'tollgate-bench-'));
  const distDir = join(snapshot, 'dist');
  cpSync(dist, distDir, { recursive: true });
  // dist/ is ESM and may import its dependencies: give the copy the package's type and modules.
  cpSync(join(ROOT, 'package.json'), join(snapshot, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(snapshot, 'node_modules'), 'dir');
  const git = (...args) => {
    try {
      return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
    } catch {
      return '';
    }
  };
  return {
    distDir,
    distHash: hashTree(distDir),
    srcHash: hashTree(join(ROOT, 'src')),
    gitHead: git('rev-parse', 'HEAD'),
    srcDirty: git('status', '--porcelain', '--', 'src') !== '',
  };
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function parseArgs(argv) {
  const options = { repeats: 5, memoryRepeats: 2, durationMs: 1000, warmupMs: 400, keys: MANY_KEYS, attempts: 3 };
  for (let i = 0; i < argv.length; i++) {
    const value = Number(argv[i + 1]);
    if (argv[i] === '--repeats') options.repeats = value;
    else if (argv[i] === '--memory-repeats') options.memoryRepeats = value;
    else if (argv[i] === '--duration') options.durationMs = value;
    else if (argv[i] === '--keys') options.keys = value;
    else if (argv[i] === '--attempts') options.attempts = value;
    else continue;
    i++;
  }
  return options;
}

const fmtOps = (v) => (v >= 1e6 ? `${(v / 1e6).toFixed(2)} M/s` : `${(v / 1e3).toFixed(0)} k/s`);
const fmtRatio = (v) => `${v.toFixed(2)}×`;
const fmtBytes = (v) => v.toFixed(1);

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const started = Date.now();
  const loadAtStart = loadavg();
  // Benchmark a snapshot of dist/: a rebuild during the run (someone else working in src/) must not
  // change the code under test between two children. Its hash identifies what was measured.
  const code = snapshotDist();
  const distDir = code.distDir;
  const plan = [];
  const throughput = ['hot-admitted', 'hot-rejected', 'many-keys', 'hot-admitted-long-key'];
  for (let r = 0; r < options.repeats; r++) {
    // Alternate the order each repeat so no subject always runs first or last.
    const order = r % 2 === 0 ? THROUGHPUT_SUBJECTS : [...THROUGHPUT_SUBJECTS].reverse();
    for (const scenario of throughput) {
      let subjects = order;
      if (scenario === 'hot-admitted') subjects = [...order, `${PEER}-nohandler`];
      if (scenario === 'hot-admitted-long-key') subjects = order.filter((subject) => LONG_KEY_SUBJECTS.includes(subject));
      for (const subject of subjects) {
        plan.push({ scenario, subject, repeat: r, distDir, durationMs: options.durationMs, warmupMs: options.warmupMs, keys: options.keys, warmupKeys: 50_000 });
      }
    }
  }
  for (let r = 0; r < options.memoryRepeats; r++) {
    const order = r % 2 === 0 ? [...SUBJECTS, 'map', 'strings'] : ['strings', 'map', ...SUBJECTS].reverse();
    for (const subject of order) plan.push({ scenario: 'memory', subject, repeat: r, distDir, keys: options.keys, entries: 1, limit: 10 });
    // sliding-log per-entry cost: 10k keys with 1 entry vs 100 entries (limit 100: the ring holds exactly 100).
    for (const entries of [1, 100]) {
      plan.push({ scenario: 'log-memory', subject: 'sliding-log', repeat: r, distDir, keys: 10_000, entries, limit: 100 });
    }
  }

  const samples = [];
  try {
    for (const [index, spec] of plan.entries()) {
      const t0 = Date.now();
      // Bytes do not depend on CPU contention: memory samples are never re-run.
      const result = await measure(spec, spec.scenario.includes('memory') ? 1 : options.attempts);
      const shownSpec = { ...spec };
      delete shownSpec.distDir;
      samples.push({ ...shownSpec, ...result });
      const shown = result.opsPerSec !== undefined ? fmtOps(result.opsPerSec) : `${fmtBytes(result.totalPerKey)} B/key`;
      process.stderr.write(
        `[${index + 1}/${plan.length}] ${spec.scenario} ${spec.subject}${spec.entries > 1 ? ` ×${spec.entries}` : ''}: ${shown} ` +
          `(${((Date.now() - t0) / 1000).toFixed(1)} s${result.contaminated ? `, CONTAMINATED: ${result.foreignCores.toFixed(2)} foreign cores` : ''})\n`,
      );
    }
  } finally {
    rmSync(dirname(distDir), { recursive: true, force: true });
  }
  const timed = samples.filter((s) => s.opsPerSec !== undefined);
  const contaminated = timed.filter((s) => s.contaminated);
  const maxForeign = Math.max(...timed.map((s) => s.foreignCores));

  const pick = (scenario, subject, field, extra = () => true) =>
    median(samples.filter((s) => s.scenario === scenario && s.subject === subject && extra(s)).map((s) => s[field]));
  const results = {};
  let widestSpread = 0;
  for (const subject of [...THROUGHPUT_SUBJECTS, 'map', 'strings', `${PEER}-nohandler`]) {
    const row = {};
    for (const scenario of throughput) {
      const values = samples.filter((s) => s.scenario === scenario && s.subject === subject).map((s) => s.opsPerSec);
      if (values.length === 0) continue;
      row[scenario] = median(values);
      row[`${scenario}Range`] = [Math.min(...values), Math.max(...values)];
      widestSpread = Math.max(widestSpread, (Math.max(...values) - Math.min(...values)) / median(values));
    }
    if (samples.some((s) => s.scenario === 'memory' && s.subject === subject)) {
      row.memory = {
        heapPerKey: pick('memory', subject, 'heapPerKey'),
        arrayBuffersPerKey: pick('memory', subject, 'arrayBuffersPerKey'),
        totalPerKey: pick('memory', subject, 'totalPerKey'),
      };
    }
    results[subject] = row;
  }
  const ratios = {};
  for (const algorithm of ALGORITHMS) {
    ratios[algorithm] = {};
    for (const scenario of throughput) {
      if (results[algorithm][scenario] !== undefined) ratios[algorithm][scenario] = results[algorithm][scenario] / results[PEER][scenario];
    }
    ratios[algorithm]['hot-admitted-vs-nohandler'] = results[algorithm]['hot-admitted'] / results[`${PEER}-nohandler`]['hot-admitted'];
    ratios[algorithm].memoryTotal = results[algorithm].memory.totalPerKey / results[PEER].memory.totalPerKey;
    ratios[algorithm].memoryHeap = results[algorithm].memory.heapPerKey / results[PEER].memory.heapPerKey;
  }
  for (const subject of SYNC_SUBJECTS) {
    ratios[subject] = {};
    for (const scenario of throughput) {
      if (results[subject][scenario] !== undefined) ratios[subject][scenario] = results[subject][scenario] / results[PEER][scenario];
    }
    ratios[subject]['hot-admitted-vs-nohandler'] = results[subject]['hot-admitted'] / results[`${PEER}-nohandler`]['hot-admitted'];
  }
  // Paired ratios: Tollgate's sample over the peer's sample of the same repeat (run seconds apart),
  // which cancels slow drift in machine speed; their spread shows how firm a ratio is.
  const pairedRatios = {};
  for (const algorithm of [...ALGORITHMS, ...SYNC_SUBJECTS]) {
    pairedRatios[algorithm] = {};
    for (const scenario of ['hot-admitted', 'hot-rejected', 'many-keys']) {
      const values = [];
      for (let r = 0; r < options.repeats; r++) {
        const ours = samples.find((s) => s.scenario === scenario && s.subject === algorithm && s.repeat === r);
        const peer = samples.find((s) => s.scenario === scenario && s.subject === PEER && s.repeat === r);
        if (ours !== undefined && peer !== undefined) values.push(ours.opsPerSec / peer.opsPerSec);
      }
      pairedRatios[algorithm][scenario] = { median: median(values), min: Math.min(...values), max: Math.max(...values) };
    }
  }
  const logOne = {
    heap: pick('log-memory', 'sliding-log', 'heapPerKey', (s) => s.entries === 1),
    total: pick('log-memory', 'sliding-log', 'totalPerKey', (s) => s.entries === 1),
  };
  const logHundred = {
    heap: pick('log-memory', 'sliding-log', 'heapPerKey', (s) => s.entries === 100),
    total: pick('log-memory', 'sliding-log', 'totalPerKey', (s) => s.entries === 100),
  };
  const slidingLog = {
    keys: 10_000,
    oneEntry: logOne,
    hundredEntries: logHundred,
    perEntryHeap: (logHundred.heap - logOne.heap) / 99,
    perEntryTotal: (logHundred.total - logOne.total) / 99,
  };

  const lines = [];
  lines.push(`| subject | hot key, admitted | ×peer | hot key, rejected | ×peer | ${options.keys.toLocaleString('en-US')} new keys | ×peer | heapUsed B/key | arrayBuffers B/key | total B/key | ×peer |`);
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  const label = (subject) =>
    subject === PEER ? PEER_LABEL : subject.endsWith(SYNC) ? `tollgate ${subject.slice(0, -SYNC.length)}, limitSync` : `tollgate ${subject}, limit`;
  for (const subject of THROUGHPUT_SUBJECTS) {
    const row = results[subject];
    const ratio = ratios[subject];
    const cell = (scenario) => [fmtOps(row[scenario]), ratio ? fmtRatio(ratio[scenario]) : '1.00×'];
    // The synchronous API uses the same store: its memory is the row above's.
    const memory = row.memory === undefined ? '| | | |' : `${fmtBytes(row.memory.heapPerKey)} | ${fmtBytes(row.memory.arrayBuffersPerKey)} | ${fmtBytes(row.memory.totalPerKey)} | ${ratio ? fmtRatio(ratio.memoryTotal) : '1.00×'} |`;
    lines.push(`| ${label(subject)} | ${[...cell('hot-admitted'), ...cell('hot-rejected'), ...cell('many-keys')].join(' | ')} | ${memory}`);
  }
  const map = results.map.memory;
  lines.push(`| reference: bare Map<string, number> | | | | | | | ${fmtBytes(map.heapPerKey)} | ${fmtBytes(map.arrayBuffersPerKey)} | ${fmtBytes(map.totalPerKey)} | |`);
  const strings = results.strings.memory;
  lines.push(`| reference: the key strings alone, in an array | | | | | | | ${fmtBytes(strings.heapPerKey)} | ${fmtBytes(strings.arrayBuffersPerKey)} | ${fmtBytes(strings.totalPerKey)} | |`);
  lines.push('');
  lines.push('Tollgate/peer per repeat (each Tollgate sample over the peer sample of the same repeat): median [min – max]');
  lines.push('');
  lines.push('| algorithm | hot key, admitted | hot key, rejected | new keys |');
  lines.push('|---|---:|---:|---:|');
  for (const algorithm of [...ALGORITHMS, ...SYNC_SUBJECTS]) {
    const cell = (scenario) => {
      const { median: mid, min, max } = pairedRatios[algorithm][scenario];
      return `${fmtRatio(mid)} [${min.toFixed(2)} – ${max.toFixed(2)}]`;
    };
    lines.push(`| ${label(algorithm).slice('tollgate '.length)} | ${cell('hot-admitted')} | ${cell('hot-rejected')} | ${cell('many-keys')} |`);
  }
  lines.push('');
  lines.push(
    `Peer without a rejection handler (\`Promise.all\` of bare \`consume()\`; only valid while nothing is denied): hot key, admitted ${fmtOps(results[`${PEER}-nohandler`]['hot-admitted'])}; ` +
      `Tollgate/that: ${[...ALGORITHMS, ...SYNC_SUBJECTS].map((a) => `${a} ${fmtRatio(ratios[a]['hot-admitted-vs-nohandler'])}`).join(', ')}.`,
  );
  lines.push(
    `Hot key, admitted, with a ${LONG_KEY.length}-character key (\`token:\` + a SHA-256 hex digest) instead of \`user:42\`: ` +
      `tollgate token-bucket ${fmtOps(results['token-bucket']['hot-admitted-long-key'])}, peer ${fmtOps(results[PEER]['hot-admitted-long-key'])}: ` +
      `${fmtRatio(ratios['token-bucket']['hot-admitted-long-key'])}.`,
  );
  lines.push(
    `sliding-log on ${slidingLog.keys.toLocaleString('en-US')} keys (limit 100): 1 entry/key ${fmtBytes(logOne.heap)} B heap (${fmtBytes(logOne.total)} B total), ` +
      `100 entries/key ${fmtBytes(logHundred.heap)} B heap (${fmtBytes(logHundred.total)} B total) → ` +
      `${fmtBytes(slidingLog.perEntryHeap)} B heap / ${fmtBytes(slidingLog.perEntryTotal)} B total per extra entry.`,
  );
  lines.push(
    `Machine quiet check: other processes used at most ${maxForeign.toFixed(2)} cores during any kept timed sample ` +
      `(limit ${FOREIGN_CPU_LIMIT}); ${contaminated.length} of ${timed.length} timed samples over the limit after ${options.attempts} attempts. ` +
      `Widest spread of a median's ${options.repeats} samples: ${(widestSpread * 100).toFixed(0)}% (max − min) / median.`,
  );
  lines.push(`Code measured: dist/ sha256 ${code.distHash.slice(0, 12)}, src/ sha256 ${code.srcHash.slice(0, 12)} (git ${code.gitHead.slice(0, 7)}${code.srcDirty ? ', src/ has uncommitted changes' : ''}).`);
  const table = lines.join('\n');
  console.log(table);

  const output = {
    date: new Date(started).toISOString(),
    wallSeconds: (Date.now() - started) / 1000,
    command: `node --expose-gc bench/memory-store.js ${process.argv.slice(2).join(' ')}`.trim(),
    machine: {
      node: process.version,
      cpu: cpus()[0]?.model,
      cores: cpus().length,
      totalMemMiB: Math.round(totalmem() / 2 ** 20),
      freeMemMiB: Math.round(freemem() / 2 ** 20),
      // Load before the run: anything else busy on the machine skews every figure.
      loadAverageAtStart: loadAtStart,
    },
    code: { distHash: code.distHash, srcHash: code.srcHash, gitHead: code.gitHead, srcDirty: code.srcDirty },
    quiet: { foreignCpuLimitCores: FOREIGN_CPU_LIMIT, maxForeignCores: maxForeign, contaminatedSamples: contaminated.length, widestSpread },
    longKey: LONG_KEY,
    method: {
      batch: BATCH,
      hotKeyDurationMs: options.durationMs,
      hotKeyWarmupMs: options.warmupMs,
      keys: options.keys,
      repeats: options.repeats,
      memoryRepeats: options.memoryRepeats,
      tollgate: { store: { maxKeys: MAX_KEYS, sweepIntervalMs: 0 }, api: 'limiter.limit(key, policy) in Promise.all batches; -sync subjects: limiter.limitSync(key, policy) in a plain loop, one await per batch', hotAdmitted: '1e9 per 1h', hotRejected: '1 per 1h', manyKeys: '10 per 1h' },
      peer: 'RateLimiterMemory({ points, duration: 3600 }); consume(key, 1).then(() => true, (res) => false)',
    },
    results,
    ratios,
    pairedRatios,
    slidingLog,
    table,
    samples,
  };
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', 'memory-store.json'), `${JSON.stringify(output, null, 2)}\n`);
  process.stderr.write(`wrote bench/results/memory-store.json in ${output.wallSeconds.toFixed(0)} s\n`);
}

const childAt = process.argv.indexOf('--child');
if (childAt !== -1) {
  const spec = { durationMs: 1000, warmupMs: 400, keys: MANY_KEYS, warmupKeys: 50_000, entries: 1, limit: 10, ...JSON.parse(process.argv[childAt + 1]) };
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc');
  runChild(spec).then(
    (result) => {
      const { user, system } = process.cpuUsage();
      result.cpuMs = (user + system) / 1000;
      if (process.send) process.send(result, () => process.exit(0));
      else {
        console.log(JSON.stringify({ spec, result }));
        process.exit(0);
      }
    },
    (error) => {
      if (process.send) process.send({ error: String(error?.stack ?? error) }, () => process.exit(1));
      else {
        console.error(error);
        process.exit(1);
      }
    },
  );
} else {
  if (typeof global.gc !== 'function') {
    console.error('run with node --expose-gc bench/memory-store.js (or npm run bench)');
    process.exit(1);
  }
  await main();
}
