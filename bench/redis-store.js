// Tollgate's Redis store against rate-limiter-flexible's RateLimiterRedis (ioredis), in one run.
//
//   npm run build && node bench/redis-store.js [--repeats N] [--duration MS] [--warmup MS]
//
// The benchmark starts its own redis-server (a child process on a free loopback port, no
// persistence) and kills it by its PID at the end; it never touches another Redis.
//
// Measurements (each in a fresh forked child process, so JIT state and heaps never carry over):
//   seq     1 request in flight (sequential awaits) over a pool of 10k keys, all admitted:
//           decisions/s and per-call latency p50/p99/p99.9 (µs).
//   conc    256 requests in flight (256 async workers, each awaiting in a loop), same key pool.
//   memory  FLUSHALL, one decision on each of 100k distinct keys, then
//           (INFO used_memory after − before) / keys, plus MEMORY USAGE of sample keys.
//   ceiling redis-benchmark on the same server: INCR, and EVALSHA of the peer's script and of
//           Tollgate's own script (1 request per call, and 256 requests per call), with and
//           without pipelining.
// Throughput runs are repeated (--repeats, default 3), interleaving every subject in each repeat
// (the order alternates between repeats); medians are reported. Each child FLUSHALLs, warms up on
// the same code path over the whole key pool, then measures; it also records Redis INFO
// commandstats (script calls and Redis-side µs per call) and CPU used by Node, by Redis and by
// everything else on the machine ("foreign" cores: another benchmark running at the same time).
//
// A single measurement can be run on its own against a running Redis; it prints JSON. With
// "profile" it CPU-profiles the timed part (summarise with bench/profile-top.js):
//   node bench/redis-store.js --child '{"scenario":"conc","subject":"tollgate:fixed-window","port":6390,"profile":"/tmp/fw.cpuprofile"}'
// Subjects: tollgate:<algorithm>[@maxBatch=N], rlflex, rlflex+autopipe (ioredis enableAutoPipelining).
import { execFile, fork, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import { rlflexSubject } from './support/rlflex.js';

const SCRIPT = fileURLToPath(import.meta.url);
const HERE = dirname(SCRIPT);
const ROOT = dirname(HERE);
const require = createRequire(import.meta.url);

const ALGORITHMS = ['fixed-window', 'token-bucket', 'gcra', 'sliding-window', 'leaky-bucket', 'sliding-log'];
const PEER = 'rlflex';
const PEER_LABEL = 'rate-limiter-flexible RateLimiterRedis (ioredis)';
const MAIN_SUBJECTS = [...ALGORITHMS.map((a) => `tollgate:${a}`), PEER];
/** Extra rows at 256 in flight only: how batch size and client-side pipelining move the numbers. */
const SENSITIVITY_SUBJECTS = ['tollgate:fixed-window@maxBatch=128', 'tollgate:fixed-window@maxBatch=64', `${PEER}+autopipe`];
const POOL = 10_000;
const IN_FLIGHT = 256;
const MEMORY_KEYS = 100_000;
/** Throughput policy: far more than a run can issue per key, so every decision is admitted (checked). */
const THROUGHPUT_POLICY = { limit: 1_000_000, windowMs: 60_000 };
/** Memory policy: the README's example limit; an hour window so no key expires while measuring. */
const MEMORY_POLICY = { limit: 100, windowMs: 3_600_000 };
const CLK_TCK = 100;

// ---------------------------------------------------------------------------------------------
// Subjects: `decide(key) → Promise<boolean>` (admitted?) over both libraries.
// ---------------------------------------------------------------------------------------------

function parseSubject(subject) {
  const [name, option] = subject.split('@');
  const maxBatch = option?.startsWith('maxBatch=') ? Number(option.slice('maxBatch='.length)) : undefined;
  if (name.startsWith('tollgate:')) return { kind: 'tollgate', algorithm: name.slice('tollgate:'.length), maxBatch };
  if (name === PEER) return { kind: 'peer', autopipe: false };
  if (name === `${PEER}+autopipe`) return { kind: 'peer', autopipe: true };
  throw new Error(`unknown subject ${subject}`);
}

async function makeSubject(subject, { port, limit, windowMs, distDir }) {
  const parsed = parseSubject(subject);
  if (parsed.kind === 'tollgate') {
    const { createLimiter, redisStore } = await import(pathToFileURL(join(distDir, 'index.js')).href);
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, ...(parsed.maxBatch ? { maxBatch: parsed.maxBatch } : {}) });
    await store.ready();
    const limiter = createLimiter({ store });
    const policy = { algorithm: parsed.algorithm, limit, window: windowMs };
    return {
      decide: async (key) => (await limiter.limit(key, policy)).allowed,
      close: () => limiter.close(),
    };
  }
  const { Redis } = require('ioredis');
  const client = new Redis({ host: '127.0.0.1', port, ...(parsed.autopipe ? { enableAutoPipelining: true } : {}) });
  return rlflexSubject(client, { points: limit, duration: windowMs / 1000 });
}

// ---------------------------------------------------------------------------------------------
// Redis helpers (an admin connection separate from the subject's)
// ---------------------------------------------------------------------------------------------

async function adminClient(port) {
  const { Redis } = require('ioredis');
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true });
  await client.connect();
  return client;
}

function parseInfo(text) {
  const fields = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** Redis-side calls and µs per command from INFO commandstats (since CONFIG RESETSTAT). */
async function commandStats(admin) {
  const info = parseInfo(await admin.info('commandstats'));
  const stats = {};
  for (const [name, value] of Object.entries(info)) {
    if (!name.startsWith('cmdstat_')) continue;
    const fields = Object.fromEntries(value.split(',').map((pair) => pair.split('=')));
    stats[name.slice('cmdstat_'.length)] = { calls: Number(fields.calls), usec: Number(fields.usec), usecPerCall: Number(fields.usec_per_call) };
  }
  return stats;
}

async function redisCpuSeconds(admin) {
  const info = parseInfo(await admin.info('cpu'));
  return Number(info.used_cpu_user) + Number(info.used_cpu_sys);
}

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat. */
function machineBusySeconds() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields;
  return (user + nice + system + irq + softirq + (steal ?? 0)) / CLK_TCK;
}

// ---------------------------------------------------------------------------------------------
// Runners
// ---------------------------------------------------------------------------------------------

/** 1 in flight until `deadline` (ms, performance.now()); latencies (µs) into `latencies` if given. */
async function runSequential(decide, keys, deadline, latencies) {
  let done = 0;
  let denied = 0;
  let i = 0;
  for (;;) {
    if ((done & 63) === 0 && performance.now() >= deadline) break;
    const key = keys[i];
    i = i + 1 === keys.length ? 0 : i + 1;
    const start = performance.now();
    const allowed = await decide(key);
    const end = performance.now();
    if (latencies !== undefined && done < latencies.length) latencies[done] = (end - start) * 1000;
    if (!allowed) denied++;
    done++;
  }
  return { done, denied };
}

/** `inFlight` workers, each awaiting in a loop, until `deadline` or until `total` decisions were issued. */
async function runConcurrent(decide, keys, inFlight, deadline, total = Infinity) {
  let next = 0;
  let done = 0;
  let denied = 0;
  const worker = async () => {
    while (next < total && performance.now() < deadline) {
      const key = keys[next++ % keys.length];
      if (!(await decide(key))) denied++;
      done++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { done, denied };
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

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

// ---------------------------------------------------------------------------------------------
// Measurements (each runs inside a child process)
// ---------------------------------------------------------------------------------------------

async function throughput(spec) {
  const admin = await adminClient(spec.port);
  await admin.flushall('SYNC');
  const subject = await makeSubject(spec.subject, { port: spec.port, distDir: spec.distDir, ...THROUGHPUT_POLICY });
  const keys = Array.from({ length: POOL }, (_, i) => `user:${i}`);
  const inFlight = spec.scenario === 'seq' ? 1 : IN_FLIGHT;
  const run = (deadline, latencies) =>
    inFlight === 1 ? runSequential(subject.decide, keys, deadline, latencies) : runConcurrent(subject.decide, keys, inFlight, deadline);

  // Warm-up: same code path, long enough to create every key of the pool.
  const warm = await run(performance.now() + spec.warmupMs);
  await admin.config('RESETSTAT');
  const latencies = inFlight === 1 ? new Float64Array(2_000_000) : undefined;
  const stopProfile = await startProfile(spec);
  const redisCpu0 = await redisCpuSeconds(admin);
  const busy0 = machineBusySeconds();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const { done, denied } = await run(t0 + spec.durationMs, latencies);
  const elapsedMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const busy = machineBusySeconds() - busy0;
  const redisCpu = (await redisCpuSeconds(admin)) - redisCpu0;
  await stopProfile();
  const stats = await commandStats(admin);
  const seconds = elapsedMs / 1000;
  const nodeCpu = (cpu.user + cpu.system) / 1e6;
  const result = {
    scenario: spec.scenario,
    subject: spec.subject,
    repeat: spec.repeat,
    inFlight,
    decisions: done,
    denied,
    warmupDecisions: warm.done,
    warmupDenied: warm.denied,
    elapsedMs,
    perSecond: done / seconds,
    nodeCores: nodeCpu / seconds,
    redisCores: redisCpu / seconds,
    // Everything else the machine did meanwhile (admin INFO calls and the parent are negligible).
    foreignCores: Math.max(0, (busy - nodeCpu - redisCpu) / seconds),
    dbsize: await admin.dbsize(),
    commandstats: stats,
  };
  // Script calls: EVALSHA and, for lone decisions of a build with the lean library, FCALL.
  const calls = (stats.evalsha?.calls ?? 0) + (stats.fcall?.calls ?? 0);
  const usec = (stats.evalsha?.usec ?? 0) + (stats.fcall?.usec ?? 0);
  const script = calls > 0 ? { calls, usec, usecPerCall: usec / calls } : undefined;
  if (script !== undefined && script.calls > 0) {
    result.scriptCalls = script.calls;
    result.decisionsPerScriptCall = done / script.calls;
    result.redisUsPerScriptCall = script.usecPerCall;
    result.redisUsPerDecision = script.usec / done;
  }
  if (latencies !== undefined) {
    const sorted = latencies.slice(0, Math.min(done, latencies.length)).sort();
    result.latencyUs = { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), p999: percentile(sorted, 0.999), max: sorted[sorted.length - 1] };
  }
  await subject.close();
  await admin.quit();
  return result;
}

async function memory(spec) {
  const admin = await adminClient(spec.port);
  const subject = await makeSubject(spec.subject, { port: spec.port, distDir: spec.distDir, ...MEMORY_POLICY });
  // One decision first, so the script is loaded and every lazily allocated structure exists.
  await subject.decide('warm-up');
  await admin.flushall('SYNC');
  await sleep(300);
  const before = Number(parseInfo(await admin.info('memory')).used_memory);
  const keys = Array.from({ length: MEMORY_KEYS }, (_, i) => `user:${i}`);
  const { done, denied } = await runConcurrent(subject.decide, keys, IN_FLIGHT, Infinity, MEMORY_KEYS);
  // Let serverCron finish incremental rehashing and shrink client buffers.
  await sleep(1_500);
  const info = parseInfo(await admin.info('memory'));
  const after = Number(info.used_memory);
  const dbsize = await admin.dbsize();
  const keyspace = parseInfo(await admin.info('keyspace')).db0;
  const samples = [];
  for (const index of [0, 42, 4_242, 54_321, 99_999]) {
    const pattern = parseSubject(spec.subject).kind === 'peer' ? `rlflx:user:${index}` : `*{user:${index}}*`;
    const [name] = pattern.includes('*') ? (await admin.scan(0, 'MATCH', pattern, 'COUNT', 1_000_000))[1] : [pattern];
    const type = await admin.type(name);
    samples.push({
      key: name,
      type,
      encoding: await admin.object('ENCODING', name),
      value: type === 'list' ? await admin.lrange(name, 0, -1) : await admin.get(name),
      pttl: await admin.pttl(name),
      memoryUsage: await admin.memory('USAGE', name, 'SAMPLES', 0),
    });
  }
  await subject.close();
  await admin.flushall('SYNC');
  await admin.quit();
  return {
    scenario: 'memory',
    subject: spec.subject,
    decisions: done,
    denied,
    dbsize,
    keyspace,
    usedMemoryBefore: before,
    usedMemoryAfter: after,
    bytesPerKey: (after - before) / dbsize,
    memoryUsageMedian: samples.map((s) => s.memoryUsage).sort((a, b) => a - b)[2],
    samples,
  };
}

async function child(spec) {
  spec.distDir ??= join(ROOT, 'dist');
  const result = spec.scenario === 'memory' ? await memory(spec) : await throughput(spec);
  if (process.send) process.send(result);
  else console.log(JSON.stringify(result, null, 2));
}

// ---------------------------------------------------------------------------------------------
// Orchestration (the parent process)
// ---------------------------------------------------------------------------------------------

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startRedis() {
  const port = await freePort();
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', '/tmp'], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const stop = () => {
    if (proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid, 'SIGTERM');
  };
  process.on('exit', stop);
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      stop();
      process.exit(130);
    });
  }
  const { Redis } = require('ioredis');
  for (let attempt = 0; attempt < 100; attempt++) {
    await sleep(50);
    const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.ping();
      client.disconnect();
      return { port, pid: proc.pid, stop };
    } catch {
      client.disconnect();
    }
  }
  stop();
  throw new Error(`redis-server did not start on port ${port}`);
}

function runChild(spec) {
  return new Promise((resolve, reject) => {
    const proc = fork(SCRIPT, ['--child', JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let result;
    proc.on('message', (message) => {
      result = message;
    });
    proc.on('error', reject);
    proc.on('exit', (code) => {
      if (code === 0 && result !== undefined) resolve(result);
      else reject(new Error(`measurement ${JSON.stringify(spec)} failed with exit code ${code}`));
    });
  });
}

/** Foreign CPU (cores) over `ms`, with our Redis idle and this process waiting: anything else running. */
async function foreignCores(ms) {
  const busy0 = machineBusySeconds();
  const cpu0 = process.cpuUsage();
  await sleep(ms);
  const cpu = process.cpuUsage(cpu0);
  return Math.max(0, (machineBusySeconds() - busy0 - (cpu.user + cpu.system) / 1e6) / (ms / 1000));
}

let quietBudgetMs = 0;
/** Waits (within a total budget) until the machine is quiet, so another benchmark does not skew ours. */
async function waitForQuiet(limitCores) {
  let foreign = await foreignCores(200);
  const start = performance.now();
  while (foreign > limitCores && quietBudgetMs > 0) {
    foreign = await foreignCores(500);
    quietBudgetMs -= 500;
  }
  return { foreignBefore: foreign, waitedMs: Math.round(performance.now() - start) };
}

function redisBenchmark(port, args) {
  return new Promise((resolve, reject) => {
    execFile('redis-benchmark', ['-p', String(port), '-q', ...args], { maxBuffer: 1 << 24 }, (error, stdout) => {
      if (error) return reject(error);
      const line = stdout.split(/[\r\n]/).filter((l) => l.includes('requests per second')).pop() ?? '';
      const match = /([\d.]+) requests per second(?:, p50=([\d.]+) msec)?/.exec(line);
      if (!match) return reject(new Error(`cannot parse redis-benchmark output: ${stdout.slice(-300)}`));
      resolve({ perSecond: Number(match[1]), p50Ms: match[2] === undefined ? undefined : Number(match[2]) });
    });
  });
}

/**
 * The EVALSHA calls Tollgate really sends (sha, key count, keys, arguments), captured from the
 * store's ioredis client: one fixed-window decision alone, and the largest call made for IN_FLIGHT
 * decisions issued in one tick. Captured rather than rebuilt here, so the ceiling follows the protocol of the
 * dist/ under test.
 */
async function captureTollgateCalls(port, distDir) {
  const { Redis } = require('ioredis');
  const { createLimiter, redisStore } = await import(pathToFileURL(join(distDir, 'index.js')).href);
  const client = new Redis({ host: '127.0.0.1', port });
  // [command, ...arguments]: a lone decision goes out as FCALL of the lean library (EVALSHA of its
  // lean script where Redis refuses the library), a batch as EVALSHA of the batch script.
  const captured = [];
  for (const command of ['evalsha', 'fcall']) {
    const original = client[command];
    client[command] = function (...args) {
      captured.push([command, ...args.map(String)]);
      return original.apply(this, args);
    };
  }
  const store = redisStore({ client });
  await store.ready();
  const limiter = createLimiter({ store });
  const policy = { algorithm: 'fixed-window', limit: THROUGHPUT_POLICY.limit, window: THROUGHPUT_POLICY.windowMs };
  await limiter.limit('user:1', policy); // may go out as EVAL after NOSCRIPT: not captured then
  captured.length = 0;
  await limiter.limit('user:1', policy);
  const single = captured[captured.length - 1];
  captured.length = 0;
  await Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => limiter.limit(`user:${i}`, policy)));
  // The store splits a tick's decisions into calls of at most maxBatch: replay the largest one.
  const batch = captured.reduce((largest, call) => (call[0] === 'evalsha' && (largest === undefined || Number(call[2]) > Number(largest[2])) ? call : largest), undefined);
  await limiter.close();
  client.disconnect();
  if (single === undefined || batch === undefined) throw new Error('could not capture Tollgate script calls');
  // Keys become random keys of the same shape: tollgate:{user:N}:fw:W -> tollgate:{rb:__rand_int__}:fw:W.
  const randomize = (call) => {
    const keyCount = Number(call[2]);
    return call.map((arg, i) => (i >= 3 && i < 3 + keyCount ? arg.replace(/\{user:\d+\}/, '{rb:__rand_int__}') : arg));
  };
  return { single: randomize(single), batch: randomize(batch) };
}

async function ceiling(port, requests, distDir) {
  const admin = await adminClient(port);
  const calls = await captureTollgateCalls(port, distDir);
  const peerScript = new (require('rate-limiter-flexible').RateLimiterRedis)({ storeClient: { defineCommand() {} }, points: 1, duration: 1 })._incrTtlLuaScript;
  const peerSha = await admin.script('LOAD', peerScript);
  const { limit, windowMs } = THROUGHPUT_POLICY;
  const cases = [
    { name: 'INCR', args: ['-t', 'incr', '-r', String(POOL)], perCall: 1 },
    // What RateLimiterRedis.consume sends (rlflxIncr): key, points, secDuration, this.points, this.duration.
    { name: 'EVALSHA peer script (SET NX EX + INCRBY + PTTL)', args: ['-r', String(POOL), 'evalsha', peerSha, '1', 'rlflx:rb:__rand_int__', '1', String(windowMs / 1000), String(limit), String(windowMs / 1000)], perCall: 1 },
    { name: `${calls.single[0].toUpperCase()} Tollgate lean script, 1 fixed-window decision per call`, args: ['-r', String(POOL), ...calls.single], perCall: 1, command: calls.single[0] },
  ];
  const results = [];
  for (const c of cases) {
    for (const pipeline of [1, 16]) {
      await admin.flushall('SYNC');
      await admin.config('RESETSTAT');
      const r = await redisBenchmark(port, ['-n', String(requests), '-P', String(pipeline), ...c.args]);
      const stats = await commandStats(admin);
      const command = c.name === 'INCR' ? stats.incr : stats[c.command ?? 'evalsha'];
      results.push({ case: c.name, clients: 50, pipeline, requests, perSecond: r.perSecond, decisionsPerSecond: r.perSecond * c.perCall, p50Ms: r.p50Ms, redisUsPerCall: command?.usecPerCall });
    }
  }
  // Tollgate's batch as Redis sees it at 256 in flight: the largest EVALSHA the store made
  // (at most maxBatch decisions). 1 client = one batch in flight at a time; 4 clients = Redis
  // always has a batch to run.
  const perBatch = Number(calls.batch[2]);
  for (const clients of [1, 4]) {
    await admin.flushall('SYNC');
    await admin.config('RESETSTAT');
    const batchCalls = Math.max(500, Math.round(requests / 100));
    const r = await redisBenchmark(port, ['-n', String(batchCalls), '-c', String(clients), '-r', String(POOL), ...calls.batch]);
    const stats = (await commandStats(admin)).evalsha;
    results.push({
      case: `EVALSHA Tollgate script, ${perBatch} fixed-window decisions per call (captured batch)`,
      clients,
      pipeline: 1,
      requests: batchCalls,
      perSecond: r.perSecond,
      decisionsPerSecond: r.perSecond * perBatch,
      p50Ms: r.p50Ms,
      redisUsPerCall: stats?.usecPerCall,
      redisUsPerDecision: stats === undefined ? undefined : stats.usecPerCall / perBatch,
    });
  }
  await admin.flushall('SYNC');
  await admin.quit();
  return results;
}

/**
 * A private copy of dist/ for the whole run (another build may replace dist/ meanwhile), with a
 * node_modules link so its imports (ioredis, cluster-key-slot) resolve to the project's.
 */
function snapshotDist() {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-bench-'));
  cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  return { distDir: join(dir, 'dist'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Newest modification time (ms) of the files under `dir`. */
function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function hashTree(dir) {
  const hash = createHash('sha256');
  const walk = (d) => {
    for (const entry of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else hash.update(path.slice(dir.length)).update(readFileSync(path));
    }
  };
  walk(dir);
  return hash.digest('hex');
}

function git(args) {
  return new Promise((resolve) => execFile('git', args, { cwd: ROOT }, (error, stdout) => resolve(error ? undefined : stdout.trim())));
}

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–');

async function main(argv) {
  const option = (name, fallback) => {
    const index = argv.indexOf(`--${name}`);
    return index === -1 ? fallback : Number(argv[index + 1]);
  };
  const repeats = option('repeats', 3);
  const durationMs = option('duration', 2_000);
  const warmupMs = option('warmup', 1_000);
  const benchRequests = option('bench-requests', 200_000);
  quietBudgetMs = option('quiet-budget', 60_000);
  const foreignLimit = 0.15;
  const wallStart = performance.now();

  const snapshot = snapshotDist();
  const { distDir } = snapshot;
  const distHash = hashTree(distDir);
  const srcNewerThanDist = newestMtime(join(ROOT, 'src')) > newestMtime(join(ROOT, 'dist'));
  if (srcNewerThanDist) console.error('warning: src/ has files newer than dist/: run npm run build first');
  const redis = await startRedis();
  const versionClient = await adminClient(redis.port);
  const redisVersion = parseInfo(await versionClient.info('server')).redis_version;
  await versionClient.quit();
  console.error(`redis-server ${redisVersion} pid ${redis.pid} on 127.0.0.1:${redis.port}`);
  const loadAtStart = loadavg();
  const measurements = [];
  try {
    // Throughput, interleaved: every subject once per repeat, order reversed on odd repeats.
    for (let repeat = 0; repeat < repeats; repeat++) {
      for (const scenario of ['seq', 'conc']) {
        let subjects = scenario === 'conc' ? [...MAIN_SUBJECTS, ...SENSITIVITY_SUBJECTS] : MAIN_SUBJECTS;
        // Peer between Tollgate algorithms rather than always first or last.
        subjects = [...subjects.slice(0, 2), PEER, ...subjects.slice(2).filter((s) => s !== PEER)];
        if (repeat % 2 === 1) subjects.reverse();
        for (const subject of subjects) {
          const quiet = await waitForQuiet(foreignLimit);
          const result = await runChild({ scenario, subject, repeat, port: redis.port, distDir, durationMs, warmupMs });
          Object.assign(result, quiet);
          measurements.push(result);
          const lat = result.latencyUs ? ` p50 ${fmt(result.latencyUs.p50)} µs p99 ${fmt(result.latencyUs.p99)} µs` : '';
          console.error(
            `r${repeat} ${scenario.padEnd(4)} ${subject.padEnd(36)} ${fmt(result.perSecond).padStart(9)}/s${lat} denied ${result.denied}` +
              ` node ${fmt(result.nodeCores, 2)} redis ${fmt(result.redisCores, 2)} foreign ${fmt(result.foreignCores, 2)} cores` +
              (result.decisionsPerScriptCall ? ` batch ${fmt(result.decisionsPerScriptCall, 1)} redis ${fmt(result.redisUsPerDecision, 2)} µs/decision` : ''),
          );
        }
      }
    }
    // Memory per key (deterministic: once per subject).
    const memoryResults = [];
    for (const subject of MAIN_SUBJECTS) {
      const result = await runChild({ scenario: 'memory', subject, port: redis.port, distDir });
      memoryResults.push(result);
      console.error(`memory ${subject.padEnd(24)} ${fmt(result.bytesPerKey, 1)} B/key used_memory, MEMORY USAGE ${result.memoryUsageMedian} B (dbsize ${result.dbsize})`);
    }
    // The ceiling: redis-benchmark on the same server.
    await waitForQuiet(foreignLimit);
    const ceilingResults = await ceiling(redis.port, benchRequests, distDir);
    for (const c of ceilingResults) console.error(`redis-benchmark ${c.case} -c ${c.clients} -P ${c.pipeline}: ${fmt(c.perSecond)} calls/s = ${fmt(c.decisionsPerSecond)} decisions/s`);

    // ---- Summary ----
    const summary = {};
    for (const scenario of ['seq', 'conc']) {
      for (const subject of [...MAIN_SUBJECTS, ...(scenario === 'conc' ? SENSITIVITY_SUBJECTS : [])]) {
        const runs = measurements.filter((m) => m.scenario === scenario && m.subject === subject);
        const clean = runs.filter((m) => m.foreignCores <= foreignLimit);
        const used = clean.length >= Math.min(2, runs.length) ? clean : runs;
        summary[`${scenario}/${subject}`] = {
          scenario,
          subject,
          runs: runs.length,
          usedRuns: used.length,
          perSecondMedian: median(used.map((m) => m.perSecond)),
          perSecondAll: runs.map((m) => Math.round(m.perSecond)),
          p50UsMedian: median(used.map((m) => m.latencyUs?.p50)),
          p99UsMedian: median(used.map((m) => m.latencyUs?.p99)),
          p999UsMedian: median(used.map((m) => m.latencyUs?.p999)),
          nodeCoresMedian: median(used.map((m) => m.nodeCores)),
          redisCoresMedian: median(used.map((m) => m.redisCores)),
          decisionsPerScriptCallMedian: median(used.map((m) => m.decisionsPerScriptCall)),
          redisUsPerDecisionMedian: median(used.map((m) => m.redisUsPerDecision)),
          denied: runs.reduce((sum, m) => sum + m.denied + m.warmupDenied, 0),
          maxForeignCores: Math.max(...runs.map((m) => m.foreignCores)),
        };
      }
    }
    const peerSeq = summary[`seq/${PEER}`];
    const peerConc = summary[`conc/${PEER}`];
    for (const row of Object.values(summary)) {
      const peer = row.scenario === 'seq' ? peerSeq : peerConc;
      row.ratioToPeer = row.perSecondMedian / peer.perSecondMedian;
      if (row.scenario === 'seq') row.p99RatioToPeer = row.p99UsMedian / peer.p99UsMedian;
    }
    const memorySummary = Object.fromEntries(memoryResults.map((m) => [m.subject, { bytesPerKey: m.bytesPerKey, memoryUsageMedian: m.memoryUsageMedian, dbsize: m.dbsize, sample: m.samples[1] }]));
    const pipelinedPeerScript = ceilingResults.find((c) => c.case.startsWith('EVALSHA peer') && c.pipeline === 16);

    // ---- Markdown ----
    const lines = [];
    lines.push(`Tollgate Redis store vs ${PEER_LABEL}; Redis ${redisVersion} on loopback, ${cpus().length} × ${cpus()[0].model}, Node ${process.version}; medians of ${repeats} interleaved runs of ${durationMs} ms.`);
    lines.push('');
    lines.push('| subject | 1 in flight dec/s | ×peer | p50 µs | p99 µs | 256 in flight dec/s | ×peer | decisions/EVALSHA | Redis µs/decision | Redis B/key (used_memory) | MEMORY USAGE B |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const subject of [...MAIN_SUBJECTS, ...SENSITIVITY_SUBJECTS]) {
      const s = summary[`seq/${subject}`];
      const c = summary[`conc/${subject}`];
      const m = memorySummary[subject];
      lines.push(
        `| ${subject === PEER ? `${PEER} (peer)` : subject} | ${s ? fmt(s.perSecondMedian) : '–'} | ${s ? fmt(s.ratioToPeer, 2) : '–'} | ${s ? fmt(s.p50UsMedian) : '–'} | ${s ? fmt(s.p99UsMedian) : '–'} ` +
          `| ${fmt(c.perSecondMedian)} | ${fmt(c.ratioToPeer, 2)} | ${fmt(c.decisionsPerScriptCallMedian, 1)} | ${fmt(c.redisUsPerDecisionMedian, 2)} | ${m ? fmt(m.bytesPerKey, 1) : '–'} | ${m ? m.memoryUsageMedian : '–'} |`,
      );
    }
    lines.push('');
    lines.push('| redis-benchmark (same server, 50 clients unless noted) | pipeline | calls/s | decisions/s | Redis µs/call |');
    lines.push('|---|---:|---:|---:|---:|');
    for (const c of ceilingResults) {
      lines.push(`| ${c.case}${c.clients !== 50 ? `, ${c.clients} client${c.clients > 1 ? 's' : ''}` : ''} | ${c.pipeline} | ${fmt(c.perSecond)} | ${fmt(c.decisionsPerSecond)} | ${fmt(c.redisUsPerCall, 2)} |`);
    }
    lines.push('');
    const fw = summary['conc/tollgate:fixed-window'];
    lines.push(`Targets: 256 in flight ≥ 2× peer: ${MAIN_SUBJECTS.filter((s) => s !== PEER).map((s) => `${s.slice(9)} ${fmt(summary[`conc/${s}`].ratioToPeer, 2)}×`).join(', ')}.`);
    lines.push(`≥ redis-benchmark pipelined peer script (${fmt(pipelinedPeerScript.perSecond)}/s): fixed-window ${fmt(fw.perSecondMedian)}/s = ${fmt(fw.perSecondMedian / pipelinedPeerScript.perSecond, 2)}×.`);
    lines.push(`p99 ≤ 1 ms at 1 in flight: ${ALGORITHMS.map((a) => `${a} ${fmt(summary[`seq/tollgate:${a}`].p99UsMedian)} µs`).join(', ')}.`);
    lines.push(`≤ 90 B/key: ${MAIN_SUBJECTS.map((s) => `${s.replace('tollgate:', '')} ${fmt(memorySummary[s].bytesPerKey, 1)}`).join(', ')}.`);
    const markdown = lines.join('\n');
    console.log(markdown);

    const wallSeconds = (performance.now() - wallStart) / 1000;
    const output = {
      date: new Date().toISOString(),
      wallSeconds,
      command: `node bench/redis-store.js ${argv.join(' ')}`.trim(),
      machine: {
        node: process.version,
        redis: redisVersion,
        cpu: cpus()[0].model,
        cores: cpus().length,
        totalMemMiB: Math.round(totalmem() / 2 ** 20),
        loadAverageAtStart: loadAtStart,
      },
      code: {
        gitHead: await git(['rev-parse', 'HEAD']),
        srcDirty: (await git(['status', '--porcelain', 'src'])) !== '',
        distHash,
        srcNewerThanDist,
        rateLimiterFlexible: require('rate-limiter-flexible/package.json').version,
        ioredis: require('ioredis/package.json').version,
      },
      method: {
        repeats,
        durationMs,
        warmupMs,
        keyPool: POOL,
        inFlight: IN_FLIGHT,
        throughputPolicy: THROUGHPUT_POLICY,
        memoryPolicy: MEMORY_POLICY,
        memoryKeys: MEMORY_KEYS,
        redisBenchmarkRequests: benchRequests,
        foreignCoresLimit: foreignLimit,
        note: 'Medians use only runs with foreign CPU ≤ the limit when at least 2 such runs exist.',
      },
      summary,
      memory: memoryResults,
      ceiling: ceilingResults,
      measurements,
      markdown,
    };
    mkdirSync(join(HERE, 'results'), { recursive: true });
    writeFileSync(join(HERE, 'results', 'redis-store.json'), `${JSON.stringify(output, null, 2)}\n`);
    console.error(`wrote bench/results/redis-store.json (${wallSeconds.toFixed(0)} s)`);
  } finally {
    redis.stop();
    snapshot.remove();
  }
  process.exit(0);
}

const childIndex = process.argv.indexOf('--child');
if (childIndex !== -1) {
  child(JSON.parse(process.argv[childIndex + 1])).then(
    () => process.exit(0),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
} else {
  main(process.argv.slice(2)).catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
