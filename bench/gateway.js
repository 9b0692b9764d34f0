// `tollgate gateway` overhead: the same upstream called directly, through the gateway (memory store
// and Redis), and through nginx's limit_req + proxy_pass, side by side in one run.
//
//   npm run build && flock /tmp/tollgate-bench.lock node bench/gateway.js [--repeats 3] [--duration 8]
//       [--base /tmp/base]       also the gateway of another built tree (before/after in one run)
//       [--subjects a,b]         only these subjects (names below; `-base` ones with --base)
//       [--lone-duration 0]      skip the one-request-at-a-time runs
//       [--max-connections N]    also the gateway (memory store) with its upstream's max_connections
//                                at N (subject gateway-mem-cN; the default is 256)
//       [--floors a,b]           also bare Node proxies without a decision (floor-NAME subjects,
//                                bench/gateway-floor-server.js: undici-dispatch, undici-request,
//                                http-agent), to tell Node's HTTP cost from Tollgate's
//       [--cpu-prof DIR]         the gateways run under `node --cpu-prof` (profiles in DIR, top
//                                frames printed at the end through bench/profile-top.js)
//
// Same number of workers on both sides: nginx runs ONE worker process (worker_processes 1,
// master_process off) and each gateway is ONE Node process (its event loop; libuv and V8 keep
// helper threads, as nginx has none).
//
// Needs `wrk`, `redis-server` and `nginx` (Debian's; run with its own config in a temp dir, daemon
// off, one process, stopped by its PID). Every server is a child process on a free loopback port,
// started here and killed by its PID at the end (bench/support/children.js):
//
//   upstream        node bench/service-hello.js http: node:http answering 200 "hello world"
//   direct          wrk → upstream
//   gateway-mem     wrk → node dist/cli/main.js gateway (memory store) → upstream
//   gateway-redis   the same with --redis, on its own redis-server (no persistence)
//   nginx           wrk → nginx (1 process) limit_req zone keyed by X-Addr (100 r/m, burst 99,
//                   nodelay) + proxy_pass to the upstream over keep-alive connections
//
// The gateway's route takes X-Addr as a descriptor (request_headers) under a wildcard rule of 100 per
// minute; wrk's X-Addr cycles over 100k addresses, so every request is admitted and forwarded by
// both limiters (checked: non-2xx responses are counted and must be 0).
//
// Two measurements per subject, repeated --repeats times, interleaved (order reversed on odd
// repeats); medians reported:
//   load     `wrk -t2 -c64 -d<duration>s --latency`: requests/s, and p50 / p99 under saturation
//   latency  `wrk -t1 -c1 -d5s --latency`: one request at a time, p50 / p99 of a lone request;
//            "added" is the subject's minus the direct call's
// Writes every sample to bench/results/gateway.json and prints a Markdown table.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { children, freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { commandExists } from './support/cpu.js';
import { removeRedisDirs, startRedisServer } from './support/redis.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const { values: flags } = parseArgs({
  options: {
    repeats: { type: 'string', default: '3' },
    duration: { type: 'string', default: '8' },
    'lone-duration': { type: 'string', default: '5' },
    base: { type: 'string' },
    subjects: { type: 'string' },
    'cpu-prof': { type: 'string' },
    floors: { type: 'string' },
    'max-connections': { type: 'string' },
  },
});
const SUBJECTS = flags.subjects?.split(',');
const wanted = (name) => SUBJECTS === undefined || SUBJECTS.includes(name) || name === 'direct';
const REPEATS = Number(flags.repeats);
const DURATION_S = Number(flags.duration);
const LONE_S = Number(flags['lone-duration']);

// Each thread starts half the addresses apart.
const WRK_SCRIPT = `
local started = 0
function setup(thread)
  thread:set("offset", started * 50000)
  started = started + 1
end
local N, counter, floor = 100000, 0, math.floor
local headers = {}
function request()
  local n = (offset + counter) % N
  counter = counter + 1
  headers["X-Addr"] = "10." .. floor(n / 65536) .. "." .. (floor(n / 256) % 256) .. "." .. (n % 256)
  return wrk.format("GET", "/hello", headers)
end
`;

const RULES = `domain: bench
descriptors:
  - key: addr
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const gatewayConfig = (upstreamPort, maxConnections) => `upstreams: { app: ${maxConnections === undefined ? `"http://127.0.0.1:${upstreamPort}"` : `{ url: "http://127.0.0.1:${upstreamPort}", max_connections: ${maxConnections} }`} }
rules: ./rules.yaml
routes:
  - match: { prefix: / }
    upstream: app
    domain: bench
    rate_limits: [{ actions: [{ request_headers: { header_name: x-addr, descriptor_key: addr } }] }]
`;

function nginxConfig(dir, port, upstreamPort) {
  const conf = `
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => `${kind}_temp_path ${dir}/${kind};`).join('\n  ')}
  keepalive_requests 1000000;
  limit_req_zone $http_x_addr zone=per_addr:64m rate=100r/m;
  limit_req_status 429;
  upstream app { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      limit_req zone=per_addr burst=99 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }
}
`;
  const path = join(dir, 'nginx.conf');
  writeFileSync(path, conf);
  return path;
}

function parseDuration(text) {
  const value = Number.parseFloat(text);
  if (text.endsWith('us')) return value;
  if (text.endsWith('ms')) return value * 1_000;
  if (text.endsWith('m')) return value * 60_000_000;
  return value * 1_000_000;
}

function runWrk(port, { threads, connections, durationS, script }) {
  const args = [`-t${threads}`, `-c${connections}`, `-d${durationS}s`, '--latency', '-s', script, `http://127.0.0.1:${port}/hello`];
  return new Promise((resolve, reject) => {
    const proc = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.set(proc.pid, { name: 'wrk', proc });
    let out = '';
    proc.stdout.on('data', (chunk) => (out += chunk));
    proc.stderr.on('data', (chunk) => (out += chunk));
    proc.on('exit', (code) => {
      children.delete(proc.pid);
      const perSecond = /Requests\/sec:\s+([\d.]+)/.exec(out);
      if (code !== 0 || perSecond === null) return reject(new Error(`wrk ${args.join(' ')} failed: ${out}`));
      const latency = {};
      for (const match of out.matchAll(/^\s+(50|99)%\s+([\d.]+(?:us|ms|s|m))\s*$/gm)) latency[`p${match[1]}`] = parseDuration(match[2]);
      const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
      const total = /(\d+) requests in/.exec(out);
      const errors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
      resolve({ perSecond: Number(perSecond[1]), requests: total ? Number(total[1]) : 0, p50Us: latency.p50, p99Us: latency.p99, non2xx: non2xx ? Number(non2xx[1]) : 0, socketErrors: errors ? errors[0] : undefined });
    });
  });
}

/** A process's user + system CPU time in ms (Linux /proc; clock ticks of 10 ms). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

async function startServers(work) {
  const upstreamPort = await freePort();
  const upstream = startChild('upstream', process.execPath, [join(HERE, 'service-hello.js'), 'http', String(upstreamPort)]);
  await waitForPort(upstream, upstreamPort);
  const redis = await startRedisServer('redis');
  writeFileSync(join(work, 'rules.yaml'), RULES);
  writeFileSync(join(work, 'gateway.yaml'), gatewayConfig(upstreamPort));
  const servers = { direct: { port: upstreamPort, pid: upstream.pid } };
  const trees = [['', ROOT], ...(flags.base === undefined ? [] : [['-base', flags.base]])];
  const gateways = trees.flatMap(([suffix, tree]) => [[`gateway-mem${suffix}`, tree, []], [`gateway-redis${suffix}`, tree, ['--redis', redis.url]]]);
  const cap = flags['max-connections'];
  if (cap !== undefined) {
    writeFileSync(join(work, `gateway-c${cap}.yaml`), gatewayConfig(upstreamPort, cap));
    gateways.push([`gateway-mem-c${cap}`, ROOT, [], `gateway-c${cap}.yaml`]);
  }
  for (const [name, tree, extra, config = 'gateway.yaml'] of gateways.filter(([name]) => wanted(name) || name.startsWith('gateway-mem-c'))) {
    const [port, adminPort] = [await freePort(), await freePort()];
    const profile = flags['cpu-prof'] === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', join(flags['cpu-prof'], name)];
    const child = startChild(name, process.execPath, [...profile, join(tree, 'dist/cli/main.js'), 'gateway', '--config', join(work, config), '--port', String(port), '--admin-port', String(adminPort), '--host', '127.0.0.1', '--log-level', 'warn', '--drain-delay', '0', ...extra]);
    await waitForPort(child, port);
    servers[name] = { port, child, pid: child.pid };
  }
  for (const variant of flags.floors?.split(',') ?? []) {
    const port = await freePort();
    const child = startChild(`floor-${variant}`, process.execPath, [join(HERE, 'gateway-floor-server.js'), variant, String(port), String(upstreamPort)]);
    await waitForPort(child, port, { marker: 'ready' });
    servers[`floor-${variant}`] = { port, child, pid: child.pid };
  }
  if (commandExists('nginx') && wanted('nginx')) {
    const dir = join(work, 'nginx');
    mkdirSync(dir);
    const port = await freePort();
    const conf = nginxConfig(dir, port, upstreamPort);
    execFileSync('nginx', ['-t', '-q', '-p', dir, '-e', join(dir, 'error.log'), '-c', conf], { stdio: 'pipe' });
    const child = startChild('nginx', 'nginx', ['-p', dir, '-e', join(dir, 'error.log'), '-c', conf]);
    await waitForPort(child, port);
    servers.nginx = { port, child, pid: child.pid };
  }
  return { servers, stop: async () => {
    for (const server of Object.values(servers)) if (server.child !== undefined) await stopChild(server.child);
    await stopChild(upstream);
    await stopChild(redis.child);
    removeRedisDirs();
  } };
}

/** Checks each limiter limits: 120 requests from one address, some must be refused. */
async function checkLimiting(servers) {
  for (const [name, server] of Object.entries(servers)) {
    if (name === 'direct' || name.startsWith('floor-')) continue;
    let limited = 0;
    for (let i = 0; i < 120; i++) if ((await fetch(`http://127.0.0.1:${server.port}/hello`, { headers: { 'x-addr': '192.0.2.9' } })).status === 429) limited += 1;
    if (limited === 0) throw new Error(`${name} did not limit 120 requests from one address`);
  }
}

async function main() {
  const work = mkdtempSync(join(tmpdir(), 'tollgate-bench-gateway-'));
  const script = join(work, 'wrk.lua');
  writeFileSync(script, WRK_SCRIPT);
  const { servers, stop } = await startServers(work);
  const samples = [];
  try {
    await checkLimiting(servers);
    const names = Object.keys(servers);
    for (const name of names) await runWrk(servers[name].port, { threads: 2, connections: 64, durationS: 2, script }); // warm-up
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      const order = repeat % 2 === 0 ? names : [...names].reverse();
      for (const name of order) {
        const cpuBefore = cpuMs(servers[name].pid);
        const load = await runWrk(servers[name].port, { threads: 2, connections: 64, durationS: DURATION_S, script });
        // CPU time (user + system) the subject's own process spent per request: steadier than req/s on a shared machine.
        load.cpuUsPerRequest = ((cpuMs(servers[name].pid) - cpuBefore) * 1000) / load.requests;
        const lone = LONE_S > 0 ? await runWrk(servers[name].port, { threads: 1, connections: 1, durationS: LONE_S, script }) : { perSecond: 0, p50Us: 0, p99Us: 0, non2xx: 0 };
        samples.push({ repeat, name, load, lone, loadavg: loadavg()[0] });
        console.error(`${name} #${repeat}: ${load.perSecond.toFixed(0)} req/s, ${load.cpuUsPerRequest.toFixed(0)} µs CPU/request, p99 ${load.p99Us} µs, lone p50 ${lone.p50Us} µs, non-2xx ${load.non2xx + lone.non2xx}`);
      }
    }
  } finally {
    await stop();
    rmSync(work, { recursive: true, force: true });
  }
  report(samples);
  if (flags['cpu-prof'] !== undefined) printProfiles(flags['cpu-prof']);
}

function report(samples) {
  const names = [...new Set(samples.map((sample) => sample.name))];
  const of = (name, pick) => median(samples.filter((sample) => sample.name === name).map(pick));
  // Ratios to nginx are taken within each repeat (the runs next to each other), then their median.
  const perRepeat = (name, peer, pick) => {
    const ratios = [];
    for (const sample of samples.filter((s) => s.name === name)) {
      const other = samples.find((s) => s.name === peer && s.repeat === sample.repeat);
      if (other !== undefined) ratios.push(pick(sample) / pick(other));
    }
    return ratios.length === 0 ? undefined : +median(ratios).toFixed(2);
  };
  const direct = { rps: of('direct', (s) => s.load.perSecond), p50: of('direct', (s) => s.lone.p50Us), p99: of('direct', (s) => s.lone.p99Us) };
  const rows = names.map((name) => {
    const rps = of(name, (s) => s.load.perSecond);
    const p50 = of(name, (s) => s.lone.p50Us);
    const p99 = of(name, (s) => s.lone.p99Us);
    return {
      name,
      rps: Math.round(rps),
      ratio: +(rps / direct.rps).toFixed(2),
      rpsVsNginx: perRepeat(name, 'nginx', (s) => s.load.perSecond),
      cpuUs: +of(name, (s) => s.load.cpuUsPerRequest).toFixed(1),
      cpuVsNginx: perRepeat(name, 'nginx', (s) => s.load.cpuUsPerRequest),
      loadP99VsNginx: perRepeat(name, 'nginx', (s) => s.load.p99Us),
      loadP50Ms: +(of(name, (s) => s.load.p50Us) / 1000).toFixed(2),
      loadP99Ms: +(of(name, (s) => s.load.p99Us) / 1000).toFixed(2),
      loneP50Us: Math.round(p50),
      loneP99Us: Math.round(p99),
      addedP50Us: Math.round(p50 - direct.p50),
      addedP99Us: Math.round(p99 - direct.p99),
      non2xx: samples.filter((sample) => sample.name === name).reduce((sum, s) => sum + s.load.non2xx + s.lone.non2xx, 0),
    };
  });
  const machine = { cpus: cpus().length, model: cpus()[0]?.model, memGiB: Math.round(totalmem() / 2 ** 30), node: process.version, loadavgAtEnd: loadavg() };
  const loads = samples.map((sample) => sample.loadavg);
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', 'gateway.json'), JSON.stringify({ machine, repeats: REPEATS, durationS: DURATION_S, loneS: LONE_S, rows, samples }, null, 2));
  console.log(`machine: ${machine.cpus} vCPU ${machine.model}, ${machine.memGiB} GiB, Node ${machine.node}, 1-min load average during the runs ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} (median ${median(loads).toFixed(1)})`);
  console.log('| subject | req/s (wrk -t2 -c64) | × direct | × nginx req/s | p50 / p99 under load (ms) | × nginx p99 | CPU µs / request | × nginx CPU | lone request p50 / p99 (µs) | added p50 / p99 (µs) | non-2xx |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const row of rows) {
    const added = row.name === 'direct' || LONE_S === 0 ? '—' : `${row.addedP50Us} / ${row.addedP99Us}`;
    const lone = LONE_S === 0 ? '—' : `${row.loneP50Us} / ${row.loneP99Us}`;
    console.log(`| ${row.name} | ${row.rps} | ${row.ratio} | ${row.rpsVsNginx ?? '—'} | ${row.loadP50Ms} / ${row.loadP99Ms} | ${row.loadP99VsNginx ?? '—'} | ${row.cpuUs} | ${row.cpuVsNginx ?? '—'} | ${lone} | ${added} | ${row.non2xx} |`);
  }
}

/** The top self-time frames of each gateway's profile (bench/profile-top.js). */
function printProfiles(dir) {
  for (const name of readdirSync(dir)) {
    for (const file of readdirSync(join(dir, name)).filter((f) => f.endsWith('.cpuprofile'))) {
      console.log(`\n${name}: ${file}`);
      console.log(execFileSync(process.execPath, [join(HERE, 'profile-top.js'), join(dir, name, file), '20', '--busy'], { encoding: 'utf8' }));
    }
  }
}

await main();
// fetch keeps idle sockets to the stopped servers referenced for a while: leave now.
process.exit(0);
