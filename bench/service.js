// The decision service under HTTP load (wrk) and gRPC load (a Node client), against a plain
// node:http hello-world server and nginx's limit_req, all in one run.
//
//   npm run build && node bench/service.js [--repeats 3] [--duration 10] [--no-profile] [--no-grpc]
//
// Needs `wrk` (Debian: apt-get install wrk), `redis-server`, and optionally `nginx` (apt-get install
// nginx); installs nothing itself. Every server is a child process on a free loopback port, started
// here and killed by its PID at the end (nothing else is ever signalled):
//
//   hello           node bench/service-hello.js http: plain node:http, 200 "hello world"
//   nginx           nginx 1 process (master_process off, daemon off), limit_req zone keyed by the
//                   X-Addr header (100 r/m, burst 99, nodelay: 100 per minute per address), config
//                   in a temp dir; answers 200 with a small JSON file
//   tollgate-mem    node dist/cli/main.js serve --config <examples/rules copy> (memory store)
//   tollgate-redis  the same with --redis, on its own redis-server (--save '' --appendonly no)
//   tollgate-redis-w2 serve --workers 2 --redis on the same redis-server (the scaling test)
//   grpc-hello      node bench/service-hello.js grpc: @grpc/grpc-js answering a constant OK
//   same-response, bare-check, serve-nolisten   bench/service-variants.js: the steps between hello
//                   world and the service (Tollgate's response without a decision; check() in a bare
//                   handler; the service without its metrics and dashboard listeners)
//
// Measurements (3 repeats, interleaved, order reversed on odd repeats; medians):
//   HTTP  `wrk -t2 -c64 -d10s --latency` with a Lua script that POSTs envoy's RateLimitRequest to
//         /json, the remote_address cycling over 100k values (10.x.y.z), so every decision is
//         admitted under examples/rules/per-ip.yaml (checked: non-2xx responses are counted). The
//         same request goes to every server. Also one run with a single address (all 429 after
//         the first 100): the denied path.
//   gRPC  bench/service-grpc-client.js in its own process: 64 calls in flight over 2 HTTP/2
//         connections, same addresses, against Tollgate (memory and Redis) and grpc-hello.
//   scale `serve --workers 2 --redis` (node:cluster: 2 workers on one port, one Redis) under the
//         same wrk, against 1 process. A build without --workers: 2 processes on 2 ports sharing
//         one Redis, each driven by its own `wrk -t1 -c32` at the same time (64 connections in all).
//   half  wrk with a Lua `delay()` that paces every connection (random delay, uniform in
//         [0, 2·d], so the 64 connections do not fire together) to half of the median max
//         throughput measured above; d is calibrated by a 3 s run. Reports p50/p99 there.
//   profile (unless --no-profile) a separate Tollgate process run with `node --cpu-prof` under
//         the same wrk load (memory, Redis, gRPC): top functions by self time.
//
// Before each measurement the script waits (up to --quiet-wait s) until processes other than its
// own use less than --quiet-limit cores, and records the load average and that foreign CPU; during
// each measurement it records the CPU of the server, the load generator, Redis and everything else.
// dist/ and the rules are copied to a temp dir first, so a rebuild during the run cannot mix
// versions. Writes every sample to bench/results/service.json and prints Markdown tables.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { canConnect, children, freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { CLK_TCK, childPids, commandExists, cpuBetween, quietWaiter, snapshotCpu } from './support/cpu.js';
import { envoyWrkScript } from './support/wrk-script.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const ADDRESSES = 100_000;
const BODY_ADDRESS = '10.0.0.1';

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(argv[index + 1]);
};
const REPEATS = option('repeats', 3);
const DURATION_S = option('duration', 10);
const CONNECTIONS = option('connections', 64);
const THREADS = option('threads', 2);
const WARMUP_S = option('warmup', 3);
const QUIET_LIMIT = option('quiet-limit', 0.25);
const QUIET_WAIT_S = option('quiet-wait', 120);
const PROFILE = !argv.includes('--no-profile');
const GRPC = !argv.includes('--no-grpc');

// ---------------------------------------------------------------------------------------------
// Processes: every child is recorded and killed by its PID, nothing else
// ---------------------------------------------------------------------------------------------

const quietness = quietWaiter({ limitCores: QUIET_LIMIT, maxWaitS: QUIET_WAIT_S, sampleMs: 1000 });
const waitForQuiet = quietness.wait;

// ---------------------------------------------------------------------------------------------
// Load generators
// ---------------------------------------------------------------------------------------------

/** The wrk Lua script (bench/support/wrk-script.js), with this run's thread count by default. */
function wrkScript(options) {
  return envoyWrkScript({ threads: THREADS, addresses: ADDRESSES, ...options });
}

let scriptDir;
let scriptCount = 0;
function writeScript(options) {
  const path = join(scriptDir, `wrk-${scriptCount++}.lua`);
  writeFileSync(path, wrkScript(options));
  return path;
}

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
  const avg = /Latency\s+([\d.]+(?:us|ms|s|m))/.exec(stdout);
  const max = /Latency\s+\S+\s+\S+\s+([\d.]+(?:us|ms|s|m))/.exec(stdout);
  if (!perSecond || !requests) throw new Error(`cannot parse wrk output:\n${stdout}`);
  return {
    requests: Number(requests[1]),
    perSecond: Number(perSecond[1]),
    latencyUs: { ...latency, avg: avg ? parseDuration(avg[1]) : NaN, max: max ? parseDuration(max[1]) : NaN },
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0,
    socketErrorDetail: socket?.[0],
  };
}

/** Runs wrk; resolves with its parsed output and the CPU seconds wrk used (via its shell's cutime). */
function runWrk({ port, threads = THREADS, connections = CONNECTIONS, durationS = DURATION_S, script }) {
  const args = [`-t${threads}`, `-c${connections}`, `-d${durationS}s`, '--latency', '-s', script, `http://127.0.0.1:${port}/json`];
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

function runGrpcClient(spec) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(HERE, 'service-grpc-client.js'), JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.set(proc.pid, { name: 'grpc-client', proc });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (c) => (stdout += c));
    proc.stderr.on('data', (c) => (stderr += c));
    proc.on('exit', (code) => {
      children.delete(proc.pid);
      if (code !== 0) return reject(new Error(`gRPC client failed (${code}): ${stderr}`));
      const result = JSON.parse(stdout.trim().split('\n').pop());
      resolve({ ...result, non2xx: result.counts.OVER_LIMIT + result.counts.other + result.counts.errors, loadGeneratorCpuSeconds: result.clientCores * (result.elapsedMs / 1000) });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------

function nginxConfig(dir, port) {
  mkdirSync(join(dir, 'www'), { recursive: true });
  // The static module answers POST to an existing file with 405; error_page turns that into an
  // internal GET of the same small JSON file, with status 200. limit_req runs before (preaccess).
  writeFileSync(join(dir, 'www', 'json'), '{"overallCode":"OK"}\n');
  writeFileSync(join(dir, 'www', 'ok.json'), '{"overallCode":"OK"}\n');
  const conf = `
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  default_type application/json;
  limit_req_zone $http_x_addr zone=per_ip:64m rate=100r/m;
  limit_req_status 429;
  server {
    listen 127.0.0.1:${port};
    root ${dir}/www;
    location = /json {
      limit_req zone=per_ip burst=99 nodelay;
      error_page 405 =200 /ok.json;
    }
    location = /ok.json { internal; }
  }
}
`;
  const path = join(dir, 'nginx.conf');
  writeFileSync(path, conf);
  return path;
}

async function postJson(port, address = BODY_ADDRESS, path = '/json') {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-addr': address },
    body: JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: address }] }] }),
  });
  return { status: response.status, body: await response.text() };
}

function snapshotDist(workDir) {
  cpSync(join(ROOT, 'dist'), join(workDir, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(workDir, 'node_modules'), 'dir');
  writeFileSync(join(workDir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  cpSync(join(ROOT, 'examples', 'rules'), join(workDir, 'rules'), { recursive: true });
  return { cli: join(workDir, 'dist', 'cli', 'main.js'), rules: join(workDir, 'rules') };
}

async function startTollgate(name, dist, { redis, nodeArgs = [], workers } = {}) {
  const port = await freePort();
  const grpcPort = await freePort();
  const args = [...nodeArgs, dist.cli, 'serve', '--config', dist.rules, '--port', String(port), '--grpc-port', String(grpcPort), '--admin-port', '0', '--host', '127.0.0.1', '--log-level', 'silent'];
  if (redis !== undefined) args.push('--redis', `redis://127.0.0.1:${redis}`);
  if (workers !== undefined) args.push('--workers', String(workers));
  const child = startChild(name, process.execPath, args);
  await waitForPort(child, port);
  // With --workers the port answers once the first worker listens: wait for all of them.
  for (let i = 0; i < 100 && workers !== undefined && childPids(child.pid).length < workers; i++) await sleep(100);
  for (let i = 0, ok = 0; i < 100 && ok < (workers ?? 1) * 3; i++) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0);
    if (ready === 200) ok++;
    else await sleep(100);
  }
  if (workers !== undefined) await sleep(1_000);
  const grpc = await canConnect(grpcPort);
  return { ...child, port, grpcPort: grpc ? grpcPort : undefined, command: `node ${args.join(' ')}` };
}

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------

function summariseProfile(file, count = 15) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map();
  const byPlace = new Map();
  let totalUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i]);
    const delta = profile.timeDeltas[i] ?? 0;
    totalUs += delta;
    const { functionName, url, lineNumber } = node.callFrame;
    const where = url ? `${url.replace(/^.*\/(dist|bench|node_modules)\//, '$1/').replace(/^file:\/\//, '')}:${lineNumber + 1}` : '';
    const name = `${functionName || '(anonymous)'} ${where}`.trim();
    selfUs.set(name, (selfUs.get(name) ?? 0) + delta);
    const place = url.includes('/dist/')
      ? `tollgate ${url.replace(/^.*\/dist\//, '').replace(/\.js$/, '')}`
      : url.includes('/node_modules/')
        ? `node_modules/${url.replace(/^.*\/node_modules\//, '').split('/')[0]}`
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
  const nameOf = (node) => {
    const { functionName, url, lineNumber } = node.callFrame;
    return `${functionName || '(anonymous)'} ${url.replace(/^.*\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}`;
  };
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
  const rows = (map) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, map === inclusiveUs ? 25 : count)
      .map(([name, us]) => ({ name, percent: Math.round((us / totalUs) * 1000) / 10, ms: Math.round(us / 1000) }));
  return { totalMs: Math.round(totalUs / 1000), top: rows(selfUs), byPlace: rows(byPlace), inclusive: rows(inclusiveUs) };
}

async function profileRun(name, dist, profileDir, { redis, grpc, hello }) {
  const dir = join(profileDir, name);
  mkdirSync(dir, { recursive: true });
  let tollgate;
  if (hello) {
    const port = await freePort();
    tollgate = startChild(`profile-${name}`, process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, join(HERE, 'service-hello.js'), 'http', String(port)]);
    tollgate.port = port;
    await waitForPort(tollgate, port);
  } else {
    tollgate = await startTollgate(`profile-${name}`, dist, { redis, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${dir}`] });
  }
  if (grpc && tollgate.grpcPort === undefined) {
    await stopChild(tollgate);
    return undefined;
  }
  let load;
  if (grpc) {
    await runGrpcClient({ port: tollgate.grpcPort, protoDir: PROTO_DIR, durationMs: 2_000 });
    load = await runGrpcClient({ port: tollgate.grpcPort, protoDir: PROTO_DIR, durationMs: 8_000, addressOffset: 50_000 });
  } else {
    await runWrk({ port: tollgate.port, durationS: 2, script: writeScript({}) });
    load = await runWrk({ port: tollgate.port, durationS: 8, script: writeScript({ offset: 50_000 }) });
  }
  await stopChild(tollgate, 15_000);
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) return { error: 'no .cpuprofile written' };
  return { perSecondUnderProfiler: load.perSecond, ...summariseProfile(join(dir, file)) };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

const PROTO_DIR = join(ROOT, 'src', 'service', 'grpc', 'proto');

function median(values) {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const fmt = (n, digits = 0) => (Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '–');
const ms = (us) => (Number.isFinite(us) ? (us / 1000).toFixed(2) : '–');

function git(args) {
  return new Promise((resolve) => execFile('git', args, { cwd: ROOT }, (error, stdout) => resolve(error ? undefined : stdout.trim())));
}

async function main() {
  const wallStart = performance.now();
  const missing = ['wrk', 'redis-server'].filter((c) => !commandExists(c));
  if (missing.length > 0) {
    console.error(`bench/service.js needs ${missing.join(' and ')} (Debian: apt-get install -y ${missing.map((m) => (m === 'redis-server' ? 'redis-server' : m)).join(' ')}); it installs nothing itself.`);
    process.exit(1);
  }
  const nginxPresent = commandExists('nginx');
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) {
    console.error('dist/cli/main.js is missing: run npm run build first');
    process.exit(1);
  }

  const workDir = mkdtempSync(join(tmpdir(), 'tollgate-service-bench-'));
  scriptDir = join(workDir, 'wrk');
  mkdirSync(scriptDir);
  const dist = snapshotDist(workDir);
  const environment = {
    date: new Date().toISOString(),
    git: await git(['rev-parse', '--short', 'HEAD']),
    uncommittedInSrc: ((await git(['status', '--porcelain', '--', 'src'])) ?? '').split('\n').filter(Boolean),
    node: process.version,
    cpus: `${cpus().length} × ${cpus()[0]?.model}`,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    wrk: execFileSync('sh', ['-c', 'wrk -v 2>&1 | head -1 || true']).toString().trim(),
    nginx: nginxPresent ? execFileSync('sh', ['-c', 'nginx -v 2>&1']).toString().trim() : 'not installed',
    redis: execFileSync('redis-server', ['--version']).toString().trim(),
    loadavgAtStart: loadavg(),
    busiestAtStart: execFileSync('sh', ['-c', 'ps -eo pcpu,pid,etime,args --sort=-pcpu | head -8 | cut -c1-160']).toString().trim().split('\n'),
  };
  console.error(`git ${environment.git}, ${environment.cpus}, ${environment.node}, load ${environment.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')}`);
  if (environment.uncommittedInSrc.length > 0) console.error(`note: uncommitted changes in src/ (built into dist/):\n  ${environment.uncommittedInSrc.join('\n  ')}`);

  // ---- Servers ----
  const servers = {};
  const notes = [];
  const helloPort = await freePort();
  servers.hello = startChild('hello', process.execPath, [join(HERE, 'service-hello.js'), 'http', String(helloPort)]);
  servers.hello.port = helloPort;
  await waitForPort(servers.hello, helloPort);

  if (nginxPresent) {
    const nginxDir = join(workDir, 'nginx');
    mkdirSync(nginxDir);
    const nginxPort = await freePort();
    const conf = nginxConfig(nginxDir, nginxPort);
    try {
      execFileSync('nginx', ['-t', '-q', '-p', nginxDir, '-e', join(nginxDir, 'error.log'), '-c', conf], { stdio: 'pipe' });
      servers.nginx = startChild('nginx', 'nginx', ['-p', nginxDir, '-e', join(nginxDir, 'error.log'), '-c', conf]);
      servers.nginx.port = nginxPort;
      await waitForPort(servers.nginx, nginxPort);
    } catch (error) {
      notes.push(`nginx could not run: ${String(error.stderr ?? error.message).trim()}`);
      delete servers.nginx;
    }
  } else {
    notes.push('nginx is not installed (apt-get install -y nginx): not measured');
  }

  const redisPort = await freePort();
  servers.redis = startChild('redis', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', workDir]);
  await waitForPort(servers.redis, redisPort);

  servers.mem = await startTollgate('tollgate-mem', dist);
  servers.redisTg = await startTollgate('tollgate-redis', dist, { redis: redisPort });
  // Scaling: `serve --workers 2` (node:cluster, one port) where the build has it; otherwise two
  // processes on two ports sharing the Redis, each driven by its own wrk.
  const hasWorkers = execFileSync(process.execPath, [dist.cli, 'serve', '--help']).toString().includes('--workers');
  if (hasWorkers) servers.redisW2 = await startTollgate('tollgate-redis-w2', dist, { redis: redisPort, workers: 2 });
  else {
    servers.redisTg2 = await startTollgate('tollgate-redis2', dist, { redis: redisPort });
    notes.push('scaling: serve has no --workers flag in this build; 2 processes on 2 ports sharing one Redis, each driven by its own wrk -t1 -c32 at the same time');
  }
  environment.scaling = hasWorkers ? `serve --workers 2 (${childPids(servers.redisW2.pid).length} workers seen)` : '2 separate processes';
  const grpcAvailable = GRPC && servers.mem.grpcPort !== undefined && existsSync(join(PROTO_DIR, 'envoy', 'service', 'ratelimit', 'v3', 'rls.proto'));
  if (!GRPC) notes.push('gRPC: skipped (--no-grpc)');
  else if (!grpcAvailable) notes.push('gRPC: the service does not listen on --grpc-port (not implemented in this build): not measured');
  if (grpcAvailable) {
    const grpcHelloPort = await freePort();
    servers.grpcHello = startChild('grpc-hello', process.execPath, [join(HERE, 'service-hello.js'), 'grpc', String(grpcHelloPort), PROTO_DIR]);
    servers.grpcHello.grpcPort = grpcHelloPort;
    await waitForPort(servers.grpcHello, grpcHelloPort);
  }
  // Between hello world and Tollgate: where the service's time per request goes.
  for (const [key, mode] of [['sameResponse', 'same-response'], ['bareCheck', 'bare-check'], ['serveNoListeners', 'serve-no-listeners']]) {
    const port = await freePort();
    const child = startChild(`variant-${mode}`, process.execPath, [join(HERE, 'service-variants.js'), mode, String(port), join(workDir, 'dist'), dist.rules]);
    try {
      await waitForPort(child, port);
      servers[key] = Object.assign(child, { port });
    } catch (error) {
      notes.push(`variant ${mode} could not start: ${error.message.slice(0, 300)}`);
      await stopChild(child);
    }
  }
  environment.tollgateCommands = [servers.mem.command, servers.redisTg.command, (servers.redisW2 ?? servers.redisTg2).command];

  // ---- Sanity: every server answers the request as expected ----
  const checks = {};
  for (const [key, server] of Object.entries({ hello: servers.hello, nginx: servers.nginx, mem: servers.mem, redisTg: servers.redisTg, redisTg2: servers.redisTg2, redisW2: servers.redisW2, sameResponse: servers.sameResponse, bareCheck: servers.bareCheck, serveNoListeners: servers.serveNoListeners })) {
    if (server === undefined) continue;
    const answer = await postJson(server.port);
    checks[key] = answer;
    if (answer.status !== 200) throw new Error(`${key} answered ${answer.status}: ${answer.body}`);
    if (key.startsWith('mem') || key.startsWith('redis') || key === 'bareCheck' || key === 'serveNoListeners') {
      if (JSON.parse(answer.body).overallCode !== 'OK') throw new Error(`${key}: ${answer.body}`);
    }
  }
  if (servers.nginx !== undefined) {
    // limit_req must be in force: 120 quick requests from one address → some 429s.
    const statuses = [];
    for (let i = 0; i < 120; i++) statuses.push((await postJson(servers.nginx.port, '192.0.2.9')).status);
    checks.nginxLimitReq = { ok: statuses.filter((s) => s === 200).length, limited: statuses.filter((s) => s === 429).length };
    if (checks.nginxLimitReq.limited === 0) throw new Error('nginx limit_req is not limiting: 120 requests from one address all passed');
  }
  console.error(`checks: ${JSON.stringify(checks)}`);

  // ---- Subjects ----
  const HTTP_SUBJECTS = [
    { id: 'hello', label: 'node:http hello world', port: () => servers.hello.port },
    ...(servers.nginx ? [{ id: 'nginx', label: 'nginx limit_req (1 process)', port: () => servers.nginx.port }] : []),
    { id: 'mem', label: 'Tollgate /json, memory store', port: () => servers.mem.port },
    { id: 'redis', label: 'Tollgate /json, Redis store', port: () => servers.redisTg.port },
    { id: 'mem-429', label: 'Tollgate /json, memory store, 1 address (429s)', port: () => servers.mem.port, fixed: '192.0.2.1' },
    ...(servers.sameResponse ? [{ id: 'same-response', label: "node:http, JSON.parse + Tollgate's exact response, no decision", port: () => servers.sameResponse.port }] : []),
    ...(servers.bareCheck ? [{ id: 'bare-check', label: "node:http + Tollgate's check() (memory), no service layer", port: () => servers.bareCheck.port }] : []),
    ...(servers.serveNoListeners ? [{ id: 'serve-nolisten', label: 'Tollgate service (memory), check listeners (metrics, dashboard) removed', port: () => servers.serveNoListeners.port }] : []),
  ];
  const GRPC_SUBJECTS = grpcAvailable
    ? [
        { id: 'grpc-hello', label: 'grpc-js constant answer (no limiter)', grpcPort: () => servers.grpcHello.grpcPort },
        { id: 'grpc-mem', label: 'Tollgate gRPC, memory store', grpcPort: () => servers.mem.grpcPort },
        { id: 'grpc-redis', label: 'Tollgate gRPC, Redis store', grpcPort: () => servers.redisTg.grpcPort },
      ]
    : [];
  const SCALE_SUBJECT = hasWorkers
    ? { id: 'redis-w2', label: 'Tollgate /json, Redis store, serve --workers 2', port: () => servers.redisW2.port }
    : { id: 'redis-x2', label: 'Tollgate /json, Redis store, 2 processes (2 ports, 2 × wrk -t1 -c32)', scale: true };
  const subjects = [...HTTP_SUBJECTS, ...GRPC_SUBJECTS, SCALE_SUBJECT];

  let offsetCounter = 0;
  const nextOffset = () => (offsetCounter++ * 7_919) % ADDRESSES;

  async function measure(subject, durationS = DURATION_S, extra = {}) {
    const before = snapshotCpu();
    let result;
    if (subject.scale) {
      const scripts = [writeScript({ threads: 1, offset: nextOffset() }), writeScript({ threads: 1, offset: nextOffset() + ADDRESSES / 2 })];
      const half = Math.round(CONNECTIONS / 2);
      const [a, b] = await Promise.all([
        runWrk({ port: servers.redisTg.port, threads: 1, connections: half, durationS, script: scripts[0] }),
        runWrk({ port: servers.redisTg2.port, threads: 1, connections: half, durationS, script: scripts[1] }),
      ]);
      result = {
        perSecond: a.perSecond + b.perSecond,
        perProcess: [a.perSecond, b.perSecond],
        latencyUs: { p50: Math.max(a.latencyUs.p50, b.latencyUs.p50), p99: Math.max(a.latencyUs.p99, b.latencyUs.p99) },
        non2xx: a.non2xx + b.non2xx,
        socketErrors: a.socketErrors + b.socketErrors,
        loadGeneratorCpuSeconds: a.loadGeneratorCpuSeconds + b.loadGeneratorCpuSeconds,
        command: `${a.command}  &  ${b.command}`,
      };
    } else if (subject.grpcPort) {
      result = await runGrpcClient({ port: subject.grpcPort(), protoDir: PROTO_DIR, durationMs: durationS * 1000, inFlight: CONNECTIONS, addressOffset: nextOffset(), ...extra });
    } else {
      const script = writeScript({ fixed: subject.fixed, offset: nextOffset(), meanDelayMs: extra.meanDelayMs });
      result = await runWrk({ port: subject.port(), durationS, script });
    }
    const cpu = cpuBetween(before, snapshotCpu(), result.loadGeneratorCpuSeconds);
    return { ...result, cpu };
  }

  // Warm-up (JIT, connections, the first keys): not recorded.
  for (const subject of subjects) {
    await measure(subject, WARMUP_S);
  }

  const samples = [];
  const log = (s) =>
    console.error(
      `r${s.repeat} ${s.kind.padEnd(5)} ${s.subject.padEnd(14)} ${fmt(s.perSecond).padStart(8)}/s p50 ${ms(s.latencyUs.p50)} ms p99 ${ms(s.latencyUs.p99)} ms` +
        ` non-2xx ${s.non2xx} errors ${s.socketErrors ?? s.counts?.errors ?? 0} | server ${fmt(s.serverCores, 2)} loadgen ${fmt(s.cpu.loadGeneratorCores, 2)}` +
        ` redis ${fmt(s.cpu.servers.redis ?? 0, 2)} foreign ${fmt(s.cpu.foreignCores, 2)} steal ${fmt(s.cpu.stealCores, 2)} cores; load ${s.loadavg1.toFixed(2)}` +
        (s.waitedMs > 500 ? ` (waited ${(s.waitedMs / 1000).toFixed(0)} s for quiet)` : ''),
    );
  const serverCores = (subject, cpu) => {
    const names = { hello: ['hello'], nginx: ['nginx'], mem: ['tollgate-mem'], 'mem-429': ['tollgate-mem'], redis: ['tollgate-redis'], 'grpc-hello': ['grpc-hello'], 'grpc-mem': ['tollgate-mem'], 'grpc-redis': ['tollgate-redis'], 'redis-x2': ['tollgate-redis', 'tollgate-redis2'], 'redis-w2': ['tollgate-redis-w2'], 'same-response': ['variant-same-response'], 'bare-check': ['variant-bare-check'], 'serve-nolisten': ['variant-serve-no-listeners'] }[subject.id] ?? [];
    return names.reduce((sum, name) => sum + (cpu.servers[name] ?? 0), 0);
  };

  // ---- Max throughput, interleaved ----
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const order = repeat % 2 === 0 ? subjects : [...subjects].reverse();
    for (const subject of order) {
      const quiet = await waitForQuiet();
      const result = await measure(subject);
      const sample = { kind: 'max', subject: subject.id, repeat, ...quiet, ...result, serverCores: serverCores(subject, result.cpu) };
      samples.push(sample);
      log(sample);
    }
  }
  const maxOf = (id) => median(samples.filter((s) => s.kind === 'max' && s.subject === id).map((s) => s.perSecond));

  // ---- p99 at half of the max: paced wrk ----
  const paced = [
    { subject: HTTP_SUBJECTS.find((s) => s.id === 'mem'), rate: maxOf('mem') / 2 },
    { subject: HTTP_SUBJECTS.find((s) => s.id === 'redis'), rate: maxOf('redis') / 2 },
    { subject: HTTP_SUBJECTS.find((s) => s.id === 'hello'), rate: maxOf('mem') / 2, note: 'at Tollgate memory half-load rate' },
  ];
  for (const p of paced) {
    // Each connection waits d (mean) then sends; one cycle is d + latency. Calibrate d so the
    // achieved rate is the target: a first run at d0 = connections / rate gives the latency.
    const d0 = (CONNECTIONS / p.rate) * 1000;
    await waitForQuiet();
    const calibration = await measure(p.subject, 3, { meanDelayMs: d0 });
    const cycleMs = (CONNECTIONS / calibration.perSecond) * 1000;
    p.meanDelayMs = Math.max(0, d0 - (cycleMs - d0));
    p.calibration = { d0, achieved: calibration.perSecond, meanDelayMs: p.meanDelayMs };
    console.error(`half-load ${p.subject.id}: target ${fmt(p.rate)}/s, d0 ${d0.toFixed(2)} ms → ${fmt(calibration.perSecond)}/s; d ${p.meanDelayMs.toFixed(2)} ms`);
  }
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const order = repeat % 2 === 0 ? paced : [...paced].reverse();
    for (const p of order) {
      const quiet = await waitForQuiet();
      const result = await measure(p.subject, DURATION_S, { meanDelayMs: p.meanDelayMs });
      const sample = { kind: 'half', subject: p.subject.id, targetPerSecond: p.rate, meanDelayMs: p.meanDelayMs, repeat, ...quiet, ...result, serverCores: serverCores(p.subject, result.cpu) };
      samples.push(sample);
      log(sample);
    }
  }

  // ---- Profiles ----
  let profiles;
  if (PROFILE) {
    const profileDir = join(workDir, 'profiles');
    profiles = {};
    await waitForQuiet();
    profiles.hello = await profileRun('hello', dist, profileDir, { hello: true });
    profiles.mem = await profileRun('mem', dist, profileDir, {});
    profiles.redis = await profileRun('redis', dist, profileDir, { redis: redisPort });
    if (grpcAvailable) profiles.grpcMem = await profileRun('grpc-mem', dist, profileDir, { grpc: true });
    for (const [name, p] of Object.entries(profiles)) {
      if (p === undefined) continue;
      console.error(`\nprofile ${name} (${fmt(p.perSecondUnderProfiler)}/s under the profiler, ${p.totalMs} ms sampled)`);
      for (const row of p.top) console.error(`  ${String(row.percent).padStart(5)}%  ${row.name}`);
      console.error('  by place:');
      for (const row of p.byPlace) console.error(`  ${String(row.percent).padStart(5)}%  ${row.name}`);
      console.error('  inclusive (Tollgate and dependencies):');
      for (const row of p.inclusive) console.error(`  ${String(row.percent).padStart(5)}%  ${row.name}`);
    }
  }

  // ---- Stop everything we started, by PID ----
  for (const server of [servers.sameResponse, servers.bareCheck, servers.serveNoListeners, servers.mem, servers.redisTg, servers.redisTg2, servers.redisW2, servers.hello, servers.grpcHello, servers.nginx, servers.redis]) {
    if (server !== undefined) await stopChild(server);
  }
  rmSync(workDir, { recursive: true, force: true });

  // ---- Summary ----
  const summary = {};
  for (const kind of ['max', 'half']) {
    for (const id of new Set(samples.filter((s) => s.kind === kind).map((s) => s.subject))) {
      const runs = samples.filter((s) => s.kind === kind && s.subject === id);
      summary[`${kind}/${id}`] = {
        kind,
        subject: id,
        perSecondMedian: median(runs.map((s) => s.perSecond)),
        perSecondAll: runs.map((s) => Math.round(s.perSecond)),
        p50UsMedian: median(runs.map((s) => s.latencyUs.p50)),
        p99UsMedian: median(runs.map((s) => s.latencyUs.p99)),
        p99UsAll: runs.map((s) => Math.round(s.latencyUs.p99)),
        non2xx: runs.reduce((sum, s) => sum + s.non2xx, 0),
        errors: runs.reduce((sum, s) => sum + (s.socketErrors ?? s.counts?.errors ?? 0), 0),
        serverCoresMedian: median(runs.map((s) => s.serverCores)),
        // Server CPU per request (µs): independent of how much CPU the load generator left it.
        serverUsPerRequestMedian: median(runs.map((s) => (s.serverCores / s.perSecond) * 1e6)),
        loadGeneratorCoresMedian: median(runs.map((s) => s.cpu.loadGeneratorCores)),
        redisCoresMedian: median(runs.map((s) => s.cpu.servers.redis ?? 0)),
        foreignCoresMax: Math.max(...runs.map((s) => s.cpu.foreignCores)),
        stealCoresMax: Math.max(...runs.map((s) => s.cpu.stealCores)),
        loadavg1: runs.map((s) => Math.round(s.loadavg1 * 100) / 100),
        ...(kind === 'half' ? { targetPerSecond: runs[0].targetPerSecond } : {}),
      };
    }
  }
  // Ratios within each repeat (same minutes of machine time), then their median.
  const ratio = (id, base, kind = 'max') => {
    const per = [];
    for (let r = 0; r < REPEATS; r++) {
      const a = samples.find((s) => s.kind === kind && s.subject === id && s.repeat === r);
      const b = samples.find((s) => s.kind === kind && s.subject === base && s.repeat === r);
      if (a && b) per.push(a.perSecond / b.perSecond);
    }
    return { median: median(per), all: per.map((x) => Math.round(x * 1000) / 1000) };
  };
  const ratios = {
    'mem/hello': ratio('mem', 'hello'),
    'redis/hello': ratio('redis', 'hello'),
    // Issue 15's targets: against a node:http server that reads the same body and answers the same JSON.
    ...(servers.sameResponse ? { 'mem/same-response': ratio('mem', 'same-response'), 'redis/same-response': ratio('redis', 'same-response') } : {}),
    'mem-429/hello': ratio('mem-429', 'hello'),
    'same-response/hello': ratio('same-response', 'hello'),
    'bare-check/hello': ratio('bare-check', 'hello'),
    'serve-nolisten/hello': ratio('serve-nolisten', 'hello'),
    ...(servers.nginx ? { 'nginx/hello': ratio('nginx', 'hello'), 'mem/nginx': ratio('mem', 'nginx') } : {}),
    [`${SCALE_SUBJECT.id}/redis`]: ratio(SCALE_SUBJECT.id, 'redis'),
    ...(grpcAvailable ? { 'grpc-mem/grpc-hello': ratio('grpc-mem', 'grpc-hello'), 'grpc-mem/hello': ratio('grpc-mem', 'hello'), 'grpc-redis/grpc-hello': ratio('grpc-redis', 'grpc-hello') } : {}),
  };

  const result = {
    environment: { ...environment, wallSeconds: Math.round((performance.now() - wallStart) / 1000), quietWaitedSeconds: Math.round(quietness.waitedMs() / 1000), loadavgAtEnd: loadavg() },
    settings: { repeats: REPEATS, durationS: DURATION_S, connections: CONNECTIONS, threads: THREADS, warmupS: WARMUP_S, quietLimitCores: QUIET_LIMIT, addresses: ADDRESSES },
    notes,
    checks,
    summary,
    ratios,
    halfLoadCalibration: paced.map((p) => ({ subject: p.subject.id, targetPerSecond: p.rate, ...p.calibration })),
    profiles,
    samples: samples.map(({ cpu, ...rest }) => ({ ...rest, cpu })),
  };
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', 'service.json'), `${JSON.stringify(result, null, 2)}\n`);

  // ---- Tables ----
  const labels = Object.fromEntries([...subjects].map((s) => [s.id, s.label]));
  const hello = summary['max/hello'].perSecondMedian;
  console.log(`\n| server (wrk -t${THREADS} -c${CONNECTIONS} -d${DURATION_S}s, or the gRPC client: ${CONNECTIONS} in flight) | requests/s (median of ${REPEATS}) | × hello | p50 ms | p99 ms | non-2xx | server cores | server µs CPU/request | load generator cores |`);
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const s of subjects) {
    const row = summary[`max/${s.id}`];
    console.log(
      `| ${labels[s.id]} | ${fmt(row.perSecondMedian)} (${row.perSecondAll.map((n) => fmt(n)).join(' / ')}) | ${fmt(row.perSecondMedian / hello, 2)} | ${ms(row.p50UsMedian)} | ${ms(row.p99UsMedian)} | ${fmt(row.non2xx)} | ${fmt(row.serverCoresMedian, 2)} | ${fmt(row.serverUsPerRequestMedian, 1)} | ${fmt(row.loadGeneratorCoresMedian, 2)} |`,
    );
  }
  console.log(`\n| paced (wrk + Lua delay) | target/s | achieved/s (median) | p50 ms | p99 ms (all runs) | server cores |`);
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const p of paced) {
    const row = summary[`half/${p.subject.id}`];
    console.log(`| ${labels[p.subject.id]}${p.note ? ` (${p.note})` : ''} | ${fmt(p.rate)} | ${fmt(row.perSecondMedian)} | ${ms(row.p50UsMedian)} | ${ms(row.p99UsMedian)} (${row.p99UsAll.map(ms).join(' / ')}) | ${fmt(row.serverCoresMedian, 2)} |`);
  }
  console.log('\nratios (per repeat, median):');
  for (const [name, r] of Object.entries(ratios)) console.log(`  ${name}: ${fmt(r.median, 3)} (${r.all.join(' / ')})`);
  for (const note of notes) console.log(`note: ${note}`);
  console.error(`\n${Math.round((performance.now() - wallStart) / 1000)} s; waited ${Math.round(quietness.waitedMs() / 1000)} s for quiet; results in bench/results/service.json`);
}

await main();
