// The HTTP middleware under load: each framework bare, with Tollgate (memory store, Redis store),
// and with the framework's usual rate limiter (memory and Redis), admitted and throttled.
//
//   npm run build && node bench/http-middleware.js [--rounds 5] [--duration 4] [--warmup 2] [--quick]
//       [--frameworks express,fastify,hono,node] [--extra] [--only SUBJECT,...] [--dist DIR] [--out NAME]
//   node bench/http-middleware.js --profile fastify/tollgate-memory/admitted[,express/bare/admitted ...]
//
// Needs `wrk` (Debian: apt-get install wrk), `redis-server` and `redis-cli`; installs nothing itself. Every server
// is a child process (bench/http-middleware-server.js: one framework, one variant, one limit) on a
// free loopback port, started here and killed by its PID at the end; the Redis variants share one
// redis-server (--save '' --appendonly no) started here the same way. Nothing else is signalled.
//
// Subjects (framework / variant / mode):
//   express  bare, tollgate-memory, tollgate-redis, peer-memory (express-rate-limit), peer-redis
//            (express-rate-limit + rate-limit-redis on ioredis)
//   fastify  bare, tollgate-memory (the tollgate plugin), tollgate-redis, peer-memory
//            (@fastify/rate-limit), peer-redis (@fastify/rate-limit with an ioredis client)
//   hono     bare, tollgate-memory, tollgate-redis (@hono/node-server)
//   node     bare, tollgate-memory (plain node:http, `await limiter.handle(req, res)`)
//   Every limiter: fixed window of 1 hour keyed by the client IP, its default headers.
//   mode admitted: limit 1e9 per hour, every request passes (checked: wrk counts non-2xx);
//   mode throttled: limit 1 per hour, every request after the first is a 429 (checked).
//   --extra adds, admitted only: noop (an empty middleware: what the framework charges for any) and
//   static-headers on every framework (bench/http-middleware-server.js:
//   Tollgate's three admitted headers as constants, set by a hook, no decision) and, on node:http,
//   tollgate-memory-next (the (req, res, next) form) and noop-next (an empty middleware of that form:
//   node's noop has the shape of `await limiter.handle()`, which answers after an await). --only keeps the subjects whose id starts with
//   one of the given prefixes (ids are framework/variant/mode).
//
// Load: `wrk -t2 -c100 -d4s --latency http://127.0.0.1:PORT/hello` (keep-alive, one client IP:
// loopback). autocannon reached 22k requests/s against bare Fastify where wrk reached 34-46k (2 vCPUs),
// so wrk drives every subject. Each subject gets --warmup seconds of the same load once (not
// recorded), then --rounds rounds each run every subject once, in reversed order on odd rounds, the
// subjects of one framework next to each other. Tables give medians; a ratio (to the bare framework,
// to the peer, throttled to admitted) is taken within each round, then the median of the rounds.
// For the Redis subjects, `INFO commandstats` before and after each sample gives the script calls,
// decisions per call and Redis CPU time per request.
//
// Before each sample the script waits (up to --quiet-wait s) until processes other than its own use
// at most --quiet-limit cores; during each sample it records the CPU of the server, wrk, Redis and
// everything else, and re-runs a sample during which other processes used more than --quiet-limit
// cores (up to --attempts times; the last attempt is kept and flagged). dist/ is copied to a temp
// dir first, so a rebuild during the run cannot mix versions. Writes every sample to
// bench/results/http-middleware.json (--quick: http-middleware-quick.json; --out NAME: NAME.json) and
// prints Markdown tables.
//
// --dist DIR takes Tollgate from DIR instead of ./dist (a patched build, to compare with a run on the
// real one). --compare DIR adds, on every framework, the admitted memory-store subject served from the
// build in DIR (`FRAMEWORK/baseline-memory/admitted`), in the same rounds: before and after a change,
// side by side; its ratio is printed as "×compare build".
//
// --profile runs only the named subjects, each in a fresh server under `node --cpu-prof`, with the
// same wrk load (--warmup s, then --duration s), and prints self time, time by module and inclusive
// time of Tollgate's and the dependencies' functions, each also in µs per request served, to
// bench/results/http-middleware-profiles.json too.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { canConnect, children, freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { CLK_TCK, commandExists, cpuBetween, quietWaiter, snapshotCpu } from './support/cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const SERVER = join(HERE, 'http-middleware-server.js');
const ADMITTED_LIMIT = 1_000_000_000;

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const QUICK = argv.includes('--quick');
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(argv[index + 1]);
};
const stringOption = (name) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? undefined : argv[index + 1];
};
const ROUNDS = option('rounds', QUICK ? 1 : 5);
const DURATION_S = option('duration', QUICK ? 2 : 4);
const WARMUP_S = option('warmup', QUICK ? 1 : 2);
const CONNECTIONS = option('connections', 100);
const THREADS = option('threads', 2);
const QUIET_LIMIT = option('quiet-limit', 0.25);
const QUIET_WAIT_S = option('quiet-wait', 120);
const ATTEMPTS = option('attempts', 3);
const PROFILE = stringOption('profile');
const FRAMEWORKS = stringOption('frameworks')?.split(',');
const ONLY = stringOption('only')?.split(',');
const EXTRA = argv.includes('--extra');
const DIST = stringOption('dist') ?? join(ROOT, 'dist');
/** --compare DIR: also serve the admitted memory-store subjects from the build in DIR (variant `baseline-memory`). */
const COMPARE = stringOption('compare');
const OUT = stringOption('out') ?? (QUICK ? 'http-middleware-quick' : 'http-middleware');

// ---------------------------------------------------------------------------------------------
// Subjects
// ---------------------------------------------------------------------------------------------

const VARIANTS = {
  express: ['bare', 'tollgate-memory', 'tollgate-redis', 'peer-memory', 'peer-redis'],
  fastify: ['bare', 'tollgate-memory', 'tollgate-redis', 'peer-memory', 'peer-redis'],
  hono: ['bare', 'tollgate-memory', 'tollgate-redis'],
  node: ['bare', 'tollgate-memory'],
};
/** --extra: admitted only. */
const EXTRA_VARIANTS = { express: ['noop', 'static-headers'], fastify: ['noop', 'static-headers'], hono: ['noop', 'static-headers'], node: ['noop', 'static-headers', 'tollgate-memory-next', 'noop-next'] };
const PEER_NAME = { express: { 'peer-memory': 'express-rate-limit', 'peer-redis': 'express-rate-limit + rate-limit-redis' }, fastify: { 'peer-memory': '@fastify/rate-limit', 'peer-redis': '@fastify/rate-limit, Redis' } };
const FRAMEWORK_NAME = { express: 'Express 5', fastify: 'Fastify 5', hono: 'Hono (@hono/node-server)', node: 'node:http' };

function label(subject) {
  const variant = {
    bare: 'bare',
    'tollgate-memory': '+ Tollgate, memory store',
    'tollgate-redis': '+ Tollgate, Redis',
    'tollgate-memory-next': '+ Tollgate, memory store, (req, res, next) form',
    'static-headers': 'static headers (a hook sets 3 constant X-RateLimit-* headers, no decision)',
    noop: 'an empty middleware (passes every request on, no headers)',
    'noop-next': 'an empty middleware of the (req, res, next) form (answers in the request event)',
    'baseline-memory': `+ Tollgate, memory store, the --compare build`,
  }[subject.variant] ?? `+ ${PEER_NAME[subject.framework][subject.variant]}`;
  return subject.mode === 'throttled' ? `${variant}, throttled (429)` : variant;
}

function allSubjects() {
  const subjects = [];
  for (const [framework, variants] of Object.entries(VARIANTS)) {
    if (FRAMEWORKS !== undefined && !FRAMEWORKS.includes(framework)) continue;
    for (const variant of variants) {
      subjects.push({ framework, variant, mode: 'admitted' });
      if (variant !== 'bare') subjects.push({ framework, variant, mode: 'throttled' });
    }
    if (EXTRA) for (const variant of EXTRA_VARIANTS[framework]) subjects.push({ framework, variant, mode: 'admitted' });
    if (COMPARE !== undefined) subjects.push({ framework, variant: 'baseline-memory', mode: 'admitted' });
  }
  return subjects.map((s) => ({ ...s, id: `${s.framework}/${s.variant}/${s.mode}` })).filter((s) => ONLY === undefined || ONLY.some((prefix) => s.id.startsWith(prefix)));
}

// ---------------------------------------------------------------------------------------------
// Processes: every child is recorded and killed by its PID, nothing else
// ---------------------------------------------------------------------------------------------

const quietness = quietWaiter({ limitCores: QUIET_LIMIT, maxWaitS: QUIET_WAIT_S, sampleMs: 500 });
const waitForQuiet = quietness.wait;

/** Redis `INFO commandstats`: { command: { calls, usec } }. */
function redisCommandStats(port) {
  const stats = {};
  const text = execFileSync('redis-cli', ['-p', String(port), 'INFO', 'commandstats']).toString();
  for (const match of text.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+)/gm)) stats[match[1]] = { calls: Number(match[2]), usec: Number(match[3]) };
  return stats;
}

/** The commands a client sends (Redis 7 also counts the commands a script runs, inside the script's time). */
const TOP_LEVEL = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall', 'fcall_ro']);

function commandStatsBetween(a, b) {
  const delta = {};
  for (const [command, after] of Object.entries(b)) {
    if (command === 'info') continue;
    const before = a[command] ?? { calls: 0, usec: 0 };
    if (after.calls > before.calls) delta[command] = { calls: after.calls - before.calls, usec: after.usec - before.usec };
  }
  return delta;
}

// ---------------------------------------------------------------------------------------------
// wrk
// ---------------------------------------------------------------------------------------------

const UNIT_US = { us: 1, ms: 1000, s: 1_000_000 };
function parseDuration(text) {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text);
  if (!match) return NaN;
  return match[2] === 'm' ? Number(match[1]) * 60e6 : Number(match[1]) * UNIT_US[match[2]];
}

function parseWrk(stdout) {
  const latency = {};
  for (const match of stdout.matchAll(/^\s+(50|75|90|99)%\s+([\d.]+(?:us|ms|s|m))\s*$/gm)) latency[`p${match[1]}`] = parseDuration(match[2]);
  const requests = /(\d+) requests in ([\d.]+)(ms|s|m),/.exec(stdout);
  const perSecond = /Requests\/sec:\s+([\d.]+)/.exec(stdout);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(stdout);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout);
  const max = /Latency\s+\S+\s+\S+\s+([\d.]+(?:us|ms|s|m))/.exec(stdout);
  if (!perSecond || !requests) throw new Error(`cannot parse wrk output:\n${stdout}`);
  return {
    requests: Number(requests[1]),
    perSecond: Number(perSecond[1]),
    latencyUs: { ...latency, max: max ? parseDuration(max[1]) : NaN },
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
  };
}

/** Runs wrk; resolves with its parsed output and the CPU seconds wrk used (via its shell's cutime). */
function runWrk(port, durationS) {
  const args = [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${durationS}s`, '--latency', `http://127.0.0.1:${port}/hello`];
  return new Promise((resolve, reject) => {
    // The shell waits for wrk, then reads its own cutime/cstime: wrk's CPU time.
    const wrapper = 'wrk "$@"; rc=$?; echo "@@STAT $(cat /proc/$$/stat)"; exit $rc';
    const proc = spawn('sh', ['-c', wrapper, 'sh', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.set(proc.pid, { name: 'wrk-shell', proc });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c) => (stdout += c));
    proc.stderr.on('data', (c) => (stderr += c));
    proc.on('exit', (code) => {
      children.delete(proc.pid);
      if (code !== 0) return reject(new Error(`wrk ${args.join(' ')} failed (${code}): ${stderr}${stdout}`));
      const stat = /@@STAT (.*)/.exec(stdout)?.[1] ?? '';
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const wrkCpu = (Number(fields[13]) + Number(fields[14])) / CLK_TCK;
      try {
        resolve({ ...parseWrk(stdout), loadGeneratorCpuSeconds: wrkCpu, command: `wrk ${args.join(' ')}` });
      } catch (error) {
        reject(error);
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

let compareDist;

function snapshotDist(workDir, from = DIST) {
  mkdirSync(workDir, { recursive: true });
  cpSync(from, join(workDir, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(workDir, 'node_modules'), 'dir');
  writeFileSync(join(workDir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  return join(workDir, 'dist');
}

async function startServer(subject, dist, redisUrl, nodeArgs = []) {
  const port = await freePort();
  const limit = subject.mode === 'throttled' ? 1 : ADMITTED_LIMIT;
  // The --compare build is the same server variant, Tollgate taken from the other dist.
  const [variant, from] = subject.variant === 'baseline-memory' ? ['tollgate-memory', compareDist] : [subject.variant, dist];
  const args = [...nodeArgs, SERVER, subject.framework, variant, String(limit), String(port), from, redisUrl];
  const child = startChild(subject.id, process.execPath, args);
  await waitForPort(child, port, { marker: 'ready' });
  return Object.assign(child, { port, command: `node ${args.join(' ')}` });
}

/** What the server answers: status, body, and the response headers (minus date/connection). */
async function probe(port) {
  const response = await fetch(`http://127.0.0.1:${port}/hello`);
  const headers = [...response.headers].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name));
  return { status: response.status, body: await response.text(), headers };
}

/**
 * The server answers as its mode says: admitted → 200 "hello world" twice; throttled → 429 from the
 * second request on. (Redis counters are keyed by the limiter's prefix and the IP, so servers of the
 * same limiter share them: a throttled Redis server may refuse its first request too.)
 */
async function checkServer(subject, port) {
  const first = await probe(port);
  const second = await probe(port);
  const sharedCounter = subject.mode === 'throttled' && subject.variant.endsWith('redis') && first.status === 429;
  if (!sharedCounter && (first.status !== 200 || first.body !== 'hello world')) throw new Error(`${subject.id}: first request answered ${first.status} ${first.body}`);
  const expected = subject.mode === 'throttled' ? 429 : 200;
  if (second.status !== expected) throw new Error(`${subject.id}: second request answered ${second.status}, expected ${expected}: ${second.body}`);
  return { admitted: first, second };
}

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------

/** `dist/http/core.js:12` for Tollgate, `node_modules/hono/dist/context.js:12` for a dependency. */
function shortUrl(url, lineNumber) {
  if (!url) return '';
  const short = url.includes('/node_modules/') ? url.replace(/^.*\/node_modules\//, 'node_modules/') : url.replace(/^.*\/(dist|bench)\//, '$1/');
  return `${short.replace(/^file:\/\//, '')}:${lineNumber + 1}`;
}

function summariseProfile(file, count = 20) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  const byPlace = new Map();
  let totalUs = 0;
  let idleUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const delta = profile.timeDeltas[i] ?? 0;
    totalUs += delta;
    const { functionName, url, lineNumber } = node.callFrame;
    if (functionName === '(idle)') idleUs += delta;
    const name = `${functionName || '(anonymous)'} ${shortUrl(url, lineNumber)}`.trim();
    selfUs.set(name, (selfUs.get(name) ?? 0) + delta);
    const place = url.includes('/node_modules/')
      ? `node_modules/${url.replace(/^.*\/node_modules\//, '').split('/').slice(0, url.includes('/node_modules/@') ? 2 : 1).join('/')}`
      : url.includes('/dist/')
        ? `tollgate ${url.replace(/^.*\/dist\//, '').replace(/\.js$/, '')}`
        : url.startsWith('node:')
          ? 'node internals (JS)'
          : functionName.startsWith('(')
            ? functionName
            : 'native / builtins';
    byPlace.set(place, (byPlace.get(place) ?? 0) + delta);
  }
  // Inclusive time (self + callees) of Tollgate's and the dependencies' functions: each sample
  // counts once for every distinct such function on its stack.
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const nameOf = (node) => `${node.callFrame.functionName || '(anonymous)'} ${shortUrl(node.callFrame.url, node.callFrame.lineNumber)}`;
  const inclusiveUs = new Map();
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    const seen = new Set();
    for (let id = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const node = byId.get(id);
      if (!/\/(dist|node_modules)\//.test(node.callFrame.url)) continue;
      const name = nameOf(node);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusiveUs.set(name, (inclusiveUs.get(name) ?? 0) + delta);
    }
  }
  const busyUs = totalUs - idleUs;
  const rows = (map, n) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, us]) => ({ name, percent: Math.round((us / totalUs) * 1000) / 10, ms: Math.round(us / 1000) }));
  return { totalMs: Math.round(totalUs / 1000), busyMs: Math.round(busyUs / 1000), top: rows(selfUs, count), byPlace: rows(byPlace, 15), inclusive: rows(inclusiveUs, 30) };
}

async function profileSubjects(ids, dist, redisUrl, workDir) {
  const results = {};
  for (const id of ids) {
    const [framework, variant, mode = 'admitted'] = id.split('/');
    const subject = { framework, variant, mode, id: `${framework}/${variant}/${mode}` };
    const dir = join(workDir, 'profiles', subject.id.replaceAll('/', '-'));
    mkdirSync(dir, { recursive: true });
    const server = await startServer(subject, dist, redisUrl, ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    await checkServer(subject, server.port);
    await waitForQuiet();
    const warm = await runWrk(server.port, WARMUP_S);
    const before = snapshotCpu();
    const load = await runWrk(server.port, DURATION_S);
    const cpu = cpuBetween(before, snapshotCpu(), load.loadGeneratorCpuSeconds);
    await stopChild(server, 15_000);
    const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`${id}: no .cpuprofile written`);
    const summary = summariseProfile(join(dir, file));
    // The profile covers the whole process (start-up, the checks, warm-up, timed load): per request
    // is over every request it served. Start-up functions (module loading) inflate nothing else.
    const requests = warm.requests + load.requests + 2;
    const perRequest = (rows) => rows.map((row) => ({ ...row, usPerRequest: Math.round(((row.ms * 1000) / requests) * 100) / 100 }));
    results[subject.id] = { perSecond: load.perSecond, requests, serverCores: cpu.servers[subject.id], ...summary, top: perRequest(summary.top), byPlace: perRequest(summary.byPlace), inclusive: perRequest(summary.inclusive) };
    const r = results[subject.id];
    console.log(`\nprofile ${subject.id}: ${fmt(load.perSecond)}/s under the profiler (${fmt(cpu.servers[subject.id] ?? NaN, 2)} server cores); ${summary.totalMs} ms sampled over ${fmt(requests)} requests (warm-up included), ${fmt((summary.busyMs * 1000) / requests, 1)} µs busy per request`);
    const line = (row) => `  ${String(row.percent).padStart(5)}%  ${row.usPerRequest.toFixed(2).padStart(6)} µs/req  ${row.name}`;
    console.log('  self time:');
    for (const row of r.top) console.log(line(row));
    console.log('  by place:');
    for (const row of r.byPlace) console.log(line(row));
    console.log('  inclusive (Tollgate and dependencies):');
    for (const row of r.inclusive) console.log(line(row));
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–');
const ms = (us) => (Number.isFinite(us) ? (us / 1000).toFixed(2) : '–');
const pct = (ratio) => `${ratio >= 1 ? '+' : '−'}${Math.abs((ratio - 1) * 100).toFixed(1)}%`;

function git(args) {
  return new Promise((resolve) => execFile('git', args, { cwd: ROOT }, (error, stdout) => resolve(error ? undefined : stdout.trim())));
}

function version(pkg) {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')).version;
  } catch {
    return 'missing';
  }
}

async function main() {
  const wallStart = performance.now();
  const missing = ['wrk', 'redis-server', 'redis-cli'].filter((c) => !commandExists(c));
  if (missing.length > 0) {
    console.error(`bench/http-middleware.js needs ${missing.join(' and ')} (Debian: apt-get install -y ${missing.join(' ')}); it installs nothing itself.`);
    process.exit(1);
  }
  if (!existsSync(join(DIST, 'http', 'index.js'))) {
    console.error(`${join(DIST, 'http', 'index.js')} is missing: run npm run build first`);
    process.exit(1);
  }

  const workDir = mkdtempSync(join(tmpdir(), 'tollgate-http-bench-'));
  // Also when the run fails half-way (a server that does not answer as expected throws).
  process.on('exit', () => rmSync(workDir, { recursive: true, force: true }));
  const dist = snapshotDist(workDir);
  if (COMPARE !== undefined) compareDist = snapshotDist(join(workDir, 'compare'), COMPARE);
  const environment = {
    date: new Date().toISOString(),
    git: await git(['rev-parse', '--short', 'HEAD']),
    uncommittedInSrc: ((await git(['status', '--porcelain', '--', 'src'])) ?? '').split('\n').filter(Boolean),
    distSha256: execFileSync('sh', ['-c', `cd '${dist}' && find . -type f | sort | xargs sha256sum | sha256sum | cut -c1-12`]).toString().trim(),
    node: process.version,
    nproc: cpus().length,
    cpu: readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1],
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    wrk: execFileSync('sh', ['-c', 'wrk -v 2>&1 | head -1 || true']).toString().trim(),
    redis: execFileSync('redis-server', ['--version']).toString().trim(),
    packages: Object.fromEntries(['express', 'fastify', 'hono', '@hono/node-server', 'express-rate-limit', 'rate-limit-redis', '@fastify/rate-limit', 'ioredis'].map((p) => [p, version(p)])),
    loadavgAtStart: loadavg(),
    busiestAtStart: execFileSync('sh', ['-c', 'ps -eo pcpu,pid,etime,args --sort=-pcpu | head -6 | cut -c1-160']).toString().trim().split('\n'),
    dist: DIST,
    compare: COMPARE,
    command: `node bench/http-middleware.js ${argv.join(' ')}`.trim(),
  };
  console.error(`git ${environment.git}, ${environment.nproc} × ${environment.cpu}, ${environment.node}, ${environment.redis.split(' ').slice(0, 3).join(' ')}, load ${environment.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')}`);
  if (environment.uncommittedInSrc.length > 0) console.error(`note: uncommitted changes in src/ (built into dist/):\n  ${environment.uncommittedInSrc.join('\n  ')}`);

  const redisPort = await freePort();
  const redis = startChild('redis', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', workDir]);
  for (let i = 0; i < 100 && !(await canConnect(redisPort)); i++) await sleep(50);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;

  if (PROFILE !== undefined) {
    const profiles = await profileSubjects(PROFILE.split(','), dist, redisUrl, workDir);
    await stopChild(redis);
    rmSync(workDir, { recursive: true, force: true });
    mkdirSync(join(HERE, 'results'), { recursive: true });
    writeFileSync(join(HERE, 'results', 'http-middleware-profiles.json'), `${JSON.stringify({ environment, settings: { durationS: DURATION_S, warmupS: WARMUP_S, connections: CONNECTIONS, threads: THREADS }, profiles }, null, 2)}\n`);
    return;
  }

  // ---- Servers: one process per subject, all started up front, each checked ----
  const subjects = allSubjects();
  const servers = {};
  const headersSeen = {};
  for (const subject of subjects) {
    servers[subject.id] = await startServer(subject, dist, redisUrl);
    headersSeen[subject.id] = await checkServer(subject, servers[subject.id].port);
  }
  console.error(`${subjects.length} servers up`);

  async function measure(subject, durationS) {
    const server = servers[subject.id];
    const usesRedis = subject.variant.endsWith('redis');
    const statsBefore = usesRedis ? redisCommandStats(redisPort) : undefined;
    const before = snapshotCpu();
    const result = await runWrk(server.port, durationS);
    const cpu = cpuBetween(before, snapshotCpu(), result.loadGeneratorCpuSeconds);
    const serverCores = cpu.servers[subject.id] ?? 0;
    const redisCommands = usesRedis ? commandStatsBetween(statsBefore, redisCommandStats(redisPort)) : undefined;
    return { ...result, cpu, serverCores, serverUsPerRequest: (serverCores / result.perSecond) * 1e6, redisCommands };
  }

  // Warm-up (JIT, connections): not recorded.
  for (const subject of subjects) await measure(subject, WARMUP_S);

  const samples = [];
  const log = (s) =>
    console.error(
      `r${s.round} ${s.subject.padEnd(32)} ${fmt(s.perSecond).padStart(7)}/s p50 ${ms(s.latencyUs.p50)} p99 ${ms(s.latencyUs.p99)} ms non-2xx ${s.non2xx}/${s.requests}` +
        ` | server ${fmt(s.serverCores, 2)} (${fmt(s.serverUsPerRequest, 1)} µs/req) wrk ${fmt(s.cpu.loadGeneratorCores, 2)} redis ${fmt(s.cpu.servers.redis ?? 0, 2)}` +
        ` foreign ${fmt(s.cpu.foreignCores, 2)} steal ${fmt(s.cpu.stealCores, 2)}; load ${s.loadavg1.toFixed(2)}` +
        (s.attempt > 1 ? ` (attempt ${s.attempt})` : '') +
        (s.waitedMs > 500 ? ` (waited ${(s.waitedMs / 1000).toFixed(0)} s for quiet)` : ''),
    );

  // ---- Rounds, interleaved ----
  let reruns = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? subjects : [...subjects].reverse();
    for (const subject of order) {
      let sample;
      for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
        const quiet = await waitForQuiet();
        const result = await measure(subject, DURATION_S);
        sample = { subject: subject.id, round, attempt, ...quiet, ...result };
        if (result.cpu.foreignCores <= QUIET_LIMIT) break;
        if (attempt < ATTEMPTS) {
          reruns++;
          console.error(`  ${subject.id}: other processes used ${fmt(result.cpu.foreignCores, 2)} cores, re-running`);
        } else sample.noisy = true;
      }
      samples.push(sample);
      log(sample);
    }
  }

  // ---- Stop everything we started, by PID ----
  for (const server of Object.values(servers)) await stopChild(server);
  await stopChild(redis);
  rmSync(workDir, { recursive: true, force: true });

  // ---- Summary ----
  const byId = (id) => samples.filter((s) => s.subject === id);
  const topLevel = (commands, field) => Object.entries(commands).reduce((n, [command, c]) => n + (TOP_LEVEL.has(command) ? c[field] : 0), 0);
  const summary = {};
  for (const subject of subjects) {
    const runs = byId(subject.id);
    summary[subject.id] = {
      perSecondMedian: median(runs.map((s) => s.perSecond)),
      perSecondAll: runs.map((s) => Math.round(s.perSecond)),
      p50UsMedian: median(runs.map((s) => s.latencyUs.p50)),
      p99UsMedian: median(runs.map((s) => s.latencyUs.p99)),
      p99UsAll: runs.map((s) => Math.round(s.latencyUs.p99)),
      requests: runs.reduce((sum, s) => sum + s.requests, 0),
      non2xx: runs.reduce((sum, s) => sum + s.non2xx, 0),
      socketErrors: runs.reduce((sum, s) => sum + s.socketErrors, 0),
      serverCoresMedian: median(runs.map((s) => s.serverCores)),
      serverUsPerRequestMedian: median(runs.map((s) => s.serverUsPerRequest)),
      wrkCoresMedian: median(runs.map((s) => s.cpu.loadGeneratorCores)),
      redisCoresMedian: median(runs.map((s) => s.cpu.servers.redis ?? 0)),
      ...(subject.variant.endsWith('redis')
        ? {
            // Script calls (EVALSHA), requests per call, and Redis's own command time per request.
            redisCallsPerRequestMedian: median(runs.map((s) => topLevel(s.redisCommands, 'calls') / s.requests)),
            redisCommandUsPerRequestMedian: median(runs.map((s) => topLevel(s.redisCommands, 'usec') / s.requests)),
            redisCpuUsPerRequestMedian: median(runs.map((s) => ((s.cpu.servers.redis ?? 0) / s.perSecond) * 1e6)),
            redisCommands: Object.keys(runs[0].redisCommands),
          }
        : {}),
      foreignCoresMax: Math.max(...runs.map((s) => s.cpu.foreignCores)),
      stealCoresMax: Math.max(...runs.map((s) => s.cpu.stealCores)),
      noisySamples: runs.filter((s) => s.noisy).length,
    };
  }
  // A ratio within each round (samples seconds apart), then the median of the rounds.
  const ratio = (id, base, field = 'perSecond') => {
    const per = [];
    for (let r = 0; r < ROUNDS; r++) {
      const a = samples.find((s) => s.subject === id && s.round === r);
      const b = samples.find((s) => s.subject === base && s.round === r);
      if (a && b) per.push(a[field] / b[field]);
    }
    return { median: median(per), all: per.map((x) => Math.round(x * 1000) / 1000) };
  };
  const ratios = {};
  for (const subject of subjects) {
    if (subject.variant === 'bare') continue;
    const bare = `${subject.framework}/bare/admitted`;
    const entry = {
      vsBare: ratio(subject.id, bare),
      cpuPerRequestVsBare: ratio(subject.id, bare, 'serverUsPerRequest'),
    };
    if (subject.mode === 'throttled') {
      const admitted = `${subject.framework}/${subject.variant}/admitted`;
      entry.vsAdmitted = ratio(subject.id, admitted);
      entry.p99VsAdmitted = { median: summary[subject.id].p99UsMedian / summary[admitted].p99UsMedian };
      entry.cpuPerRequestVsAdmitted = ratio(subject.id, admitted, 'serverUsPerRequest');
    }
    if (subject.variant === 'tollgate-memory' && subject.mode === 'admitted' && COMPARE !== undefined) {
      entry.vsCompareBuild = ratio(subject.id, `${subject.framework}/baseline-memory/admitted`);
      entry.cpuPerRequestVsCompareBuild = ratio(subject.id, `${subject.framework}/baseline-memory/admitted`, 'serverUsPerRequest');
    }
    if (subject.variant.startsWith('tollgate') && VARIANTS[subject.framework].includes('peer-memory')) {
      const peer = `${subject.framework}/${subject.variant.endsWith('redis') ? 'peer-redis' : 'peer-memory'}/${subject.mode}`;
      entry.vsPeer = ratio(subject.id, peer);
    }
    ratios[subject.id] = entry;
  }

  // ---- Targets (from the issue) ----
  const targets = [];
  const target = (name, id, measured, bar, met) => targets.push({ name, subject: id, measured, bar, met, by: measured / bar });
  for (const framework of Object.keys(VARIANTS)) {
    const id = `${framework}/tollgate-memory/admitted`;
    if (ratios[id]) target('memory store costs ≤ 5% of bare requests/s', id, ratios[id].vsBare.median, 0.95, ratios[id].vsBare.median >= 0.95);
  }
  if (ratios['fastify/tollgate-redis/admitted']) {
    const r = ratios['fastify/tollgate-redis/admitted'].vsPeer.median;
    target('Fastify + Redis ≥ 1.5× @fastify/rate-limit Redis', 'fastify/tollgate-redis/admitted', r, 1.5, r >= 1.5);
  }
  if (ratios['express/tollgate-redis/admitted']) {
    const r = ratios['express/tollgate-redis/admitted'].vsBare.median;
    target('Express + Redis ≤ 5% below bare Express', 'express/tollgate-redis/admitted', r, 0.95, r >= 0.95);
  }
  for (const subject of subjects) {
    if (subject.mode !== 'throttled' || !subject.variant.startsWith('tollgate')) continue;
    const r = ratios[subject.id].vsAdmitted.median;
    target('throttled costs no more than admitted (requests/s)', subject.id, r, 1, r >= 1);
  }

  const result = {
    environment: { ...environment, wallSeconds: Math.round((performance.now() - wallStart) / 1000), quietWaitedSeconds: Math.round(quietness.waitedMs() / 1000), reruns, loadavgAtEnd: loadavg() },
    settings: { rounds: ROUNDS, durationS: DURATION_S, warmupS: WARMUP_S, connections: CONNECTIONS, threads: THREADS, quietLimitCores: QUIET_LIMIT, attempts: ATTEMPTS, admittedLimit: ADMITTED_LIMIT },
    headers: Object.fromEntries(Object.entries(headersSeen).map(([id, h]) => [id, { admitted: h.admitted.headers, second: { status: h.second.status, headers: h.second.headers, body: h.second.body.slice(0, 200) } }])),
    servers: Object.fromEntries(Object.entries(servers).map(([id, s]) => [id, s.command])),
    summary,
    ratios,
    targets,
    samples: samples.map(({ cpu, ...rest }) => ({ ...rest, cpu })),
  };
  mkdirSync(join(HERE, 'results'), { recursive: true });
  const out = join('results', `${OUT}.json`);
  writeFileSync(join(HERE, out), `${JSON.stringify(result, null, 2)}\n`);

  // ---- Tables ----
  for (const framework of Object.keys(VARIANTS)) {
    const rows = subjects.filter((s) => s.framework === framework);
    if (rows.length === 0) continue;
    console.log(`\n### ${FRAMEWORK_NAME[framework]}\n`);
    console.log(`| variant | requests/s (median of ${ROUNDS}; all) | × bare | × peer | throttled ÷ admitted | p50 ms | p99 ms | server µs CPU/request | non-2xx |`);
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const subject of rows) {
      const row = summary[subject.id];
      const r = ratios[subject.id];
      console.log(
        `| ${label(subject)} | ${fmt(row.perSecondMedian)} (${row.perSecondAll.map((n) => fmt(n)).join(' / ')}) | ${r ? fmt(r.vsBare.median, 3) : '1'} | ${r?.vsPeer ? fmt(r.vsPeer.median, 2) : ''} | ${r?.vsAdmitted ? fmt(r.vsAdmitted.median, 3) : ''} | ${ms(row.p50UsMedian)} | ${ms(row.p99UsMedian)} | ${fmt(row.serverUsPerRequestMedian, 1)} | ${fmt(row.non2xx)} of ${fmt(row.requests)} |`,
      );
    }
  }
  const redisRows = subjects.filter((s) => s.variant.endsWith('redis'));
  if (redisRows.length > 0) {
    console.log('\n| Redis subject | commands | Redis calls/request | Redis command µs/request (commandstats) | redis-server CPU µs/request |');
    console.log('|---|---|---:|---:|---:|');
    for (const subject of redisRows) {
      const row = summary[subject.id];
      console.log(`| ${subject.framework} ${label(subject)} | ${row.redisCommands.join(', ')} | ${fmt(row.redisCallsPerRequestMedian, 3)} | ${fmt(row.redisCommandUsPerRequestMedian, 1)} | ${fmt(row.redisCpuUsPerRequestMedian, 1)} |`);
    }
  }
  console.log('\n| target | subject | measured | bar | verdict |');
  console.log('|---|---|---:|---:|---|');
  for (const t of targets) console.log(`| ${t.name} | ${t.subject} | ${fmt(t.measured, 3)} | ${t.bar} | ${t.met ? 'met' : `missed by ${pct(t.by)}`} |`);
  console.log('\nper-round ratios:');
  for (const [id, r] of Object.entries(ratios)) {
    console.log(`  ${id}: ×bare ${r.vsBare.all.join(' / ')}${r.vsPeer ? `; ×peer ${r.vsPeer.all.join(' / ')}` : ''}${r.vsAdmitted ? `; ÷admitted ${r.vsAdmitted.all.join(' / ')}` : ''}${r.vsCompareBuild ? `; ×compare build ${r.vsCompareBuild.all.join(' / ')} (median ${r.vsCompareBuild.median.toFixed(3)}; CPU/request ${r.cpuPerRequestVsCompareBuild.median.toFixed(3)})` : ''}; CPU/request ×bare ${r.cpuPerRequestVsBare.all.join(' / ')}`);
  }
  console.error(`\n${Math.round((performance.now() - wallStart) / 1000)} s; waited ${Math.round(quietness.waitedMs() / 1000)} s for quiet; ${reruns} re-runs; results in bench/${out}`);
}

await main();
