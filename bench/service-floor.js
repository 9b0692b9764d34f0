// CPU per check of the decision service over HTTP/1.1, against its floor: a bare node:http server
// answering the same bytes, in one run (issue 32 item 1, "Below node:http").
//
//   npm run build && node bench/service-floor.js [--base DIR] [--repeats 3] [--duration 8] [--profile]
//     [--uws MODULE] [--redis] [--batches 1,10,100] [--only redis,batch]
//
// Needs `wrk`; installs nothing. Child processes on free loopback ports, killed by their PIDs:
//
//   bare        bench/service-variants.js same-bytes: node:http that reads and JSON.parses the
//               body and answers the status, headers and body a Tollgate server answered to the
//               same request (recorded at start): the floor under Tollgate's /json
//   base        `serve` from DIR/dist (--base; e.g. `git worktree add /tmp/h4-base <commit>` and
//               `npm run build` there): the version before a change, A/B in the same run
//   tollgate    `serve` from this checkout's dist/
//   batch-N     the same server, POST /v1/check/batch with N checks per request (when served)
//   … redis     with --redis: base and tollgate again with `--redis` on one redis-server of their
//               own (the node's CPU per check; Redis's beside it)
//   uws         with --uws MODULE (the path of an unpacked uWebSockets.js build such as uws-pack's
//               dist/index.mjs; not a dependency): the bare answer from uWebSockets.js
//
// Every server runs the memory store on a copy of examples/rules. Load: `wrk -t2 -c64` POSTing
// envoy's RateLimitRequest for per_ip, the remote_address cycling over 100,000 values (every
// decision admitted; non-2xx answers are counted and reported). Main figure: the server's CPU
// (utime + stime from /proc, what process.cpuUsage() reports inside it) over the run ÷ the checks
// it answered, so a loaded machine changes it less than throughput. Subjects interleave, order
// reversed on odd repeats; medians of the repeats, and ratios to bare within each repeat.
// --profile: afterwards base and tollgate each run once under `node --cpu-prof` with the same
// load; bench/profile-top.js prints their top frames by self time.
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { commandExists, cpuBetween, snapshotCpu } from './support/cpu.js';
import { median } from './support/forked.js';
import { removeRedisDirs, startRedisServer } from './support/redis.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const valueOf = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
const REPEATS = Number(valueOf('repeats', 3));
const DURATION_S = Number(valueOf('duration', 8));
const BASE = valueOf('base', undefined);
const PROFILE = argv.includes('--profile');
const UWS = valueOf('uws', undefined);
const REDIS = argv.includes('--redis');
/** --only a,b: only the subjects whose id contains one of these (bare is always measured). */
const ONLY = valueOf('only', undefined)?.split(',');
const BATCH_SIZES = valueOf('batches', '1,10,100').split(',').filter(Boolean).map(Number);
const ADDRESSES = 100_000;

/** wrk's Lua: POST `path`, `batch` checks per request (none: one envoy request as the body). */
function wrkLua(path, batch, offset) {
  const check = `'{"domain":"per_ip","descriptors":[{"entries":[{"key":"remote_address","value":"' .. ip() .. '"}]}]}'`;
  const body = batch === undefined ? check : `'{"checks":[' .. table.concat(checks(), ',') .. ']}'`;
  return `
local n = ${offset}
local floor = math.floor
function ip()
  n = (n + 7919) % ${ADDRESSES}
  return "10." .. floor(n / 65536) .. "." .. (floor(n / 256) % 256) .. "." .. (n % 256)
end
function checks()
  local list = {}
  for i = 1, ${batch ?? 1} do list[i] = ${check} end
  return list
end
local headers = { ["Content-Type"] = "application/json" }
function request()
  return wrk.format("POST", "${path}", headers, ${body})
end
`;
}

function runWrk(port, path, batch, offset, dir, durationS = DURATION_S) {
  const script = join(dir, `wrk-${path.replace(/\W/g, '')}-${batch ?? 0}-${offset}.lua`);
  writeFileSync(script, wrkLua(path, batch, offset));
  const args = ['-t2', '-c64', `-d${durationS}s`, '-s', script, `http://127.0.0.1:${port}${path}`];
  return new Promise((done, fail) =>
    execFile('wrk', args, (error, stdout) => {
      if (error) return fail(error);
      const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
      done({ requests, non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0), command: `wrk ${args.join(' ')}` });
    }),
  );
}

/** A copy of `from`'s dist/ (a rebuild during the run cannot mix versions) and of the rules. */
function snapshot(from, into) {
  mkdirSync(into, { recursive: true });
  cpSync(join(from, 'dist'), join(into, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(into, 'node_modules'), 'dir');
  writeFileSync(join(into, 'package.json'), readFileSync(join(from, 'package.json')));
  cpSync(join(ROOT, 'examples', 'rules'), join(into, 'rules'), { recursive: true });
  return into;
}

async function startServe(name, dir, nodeArgs = [], redisUrl = undefined) {
  const port = await freePort();
  const grpcPort = await freePort();
  const args = [...nodeArgs, join(dir, 'dist', 'cli', 'main.js'), 'serve', '--config', join(dir, 'rules'), '--port', String(port), '--grpc-port', String(grpcPort), '--admin-port', '0', '--host', '127.0.0.1', '--log-level', 'silent'];
  if (redisUrl !== undefined) args.push('--redis', redisUrl);
  const child = startChild(name, process.execPath, args);
  await waitForPort(child, port);
  return Object.assign(child, { port });
}

async function post(port, path, body) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

const ENVOY_BODY = '{"domain":"per_ip","descriptors":[{"entries":[{"key":"remote_address","value":"192.0.2.250"}]}]}';

async function profile(name, dir, work) {
  const profileDir = join(work, `profile-${name}`);
  const started = performance.now();
  const server = await startServe(`profile-${name}`, dir, ['--cpu-prof', `--cpu-prof-dir=${profileDir}`]);
  await runWrk(server.port, '/json', undefined, 11, work, 4);
  // Only the samples of the measured load: start-up and warm-up left out (and the last second, shutdown).
  const skipMs = Math.round(performance.now() - started);
  const load = await runWrk(server.port, '/json', undefined, 13, work, 8);
  await stopChild(server, 15_000);
  const file = readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
  const top = await new Promise((done) => execFile(process.execPath, [join(HERE, 'profile-top.js'), join(profileDir, file), '20', String(skipMs)], (_e, out) => done(out)));
  console.log(`\nprofile ${name}: ${load.requests} requests in 8 s under the profiler (the first ${skipMs} ms left out)\n${top}`);
}

async function main() {
  if (!commandExists('wrk')) throw new Error('bench/service-floor.js needs wrk (Debian: apt-get install -y wrk)');
  const work = mkdtempSync(join(tmpdir(), 'tollgate-floor-'));
  const servers = {};
  servers.tollgate = await startServe('tollgate', snapshot(ROOT, join(work, 'tollgate')));
  if (BASE !== undefined) servers.base = await startServe('base', snapshot(resolve(BASE), join(work, 'base')));
  // The bare server answers exactly what Tollgate answered (Date aside, which node:http adds itself).
  const answer = await post(servers.tollgate.port, '/json', ENVOY_BODY);
  delete answer.headers.date;
  delete answer.headers.connection;
  delete answer.headers['keep-alive'];
  writeFileSync(join(work, 'answer.json'), JSON.stringify(answer));
  const barePort = await freePort();
  servers.bare = Object.assign(startChild('bare', process.execPath, [join(HERE, 'service-variants.js'), 'same-bytes', String(barePort), join(work, 'answer.json')]), { port: barePort });
  await waitForPort(servers.bare, barePort);
  if (REDIS) {
    const redis = await startRedisServer('redis');
    servers.redis = redis.child;
    servers.tollgateRedis = await startServe('tollgateRedis', join(work, 'tollgate'), [], redis.url);
    if (BASE !== undefined) servers.baseRedis = await startServe('baseRedis', join(work, 'base'), [], redis.url);
  }
  if (UWS !== undefined) {
    const uwsPort = await freePort();
    servers.uws = Object.assign(startChild('uws', process.execPath, [join(HERE, 'service-variants.js'), 'uws-same-bytes', String(uwsPort), join(work, 'answer.json'), resolve(UWS)]), { port: uwsPort });
    await waitForPort(servers.uws, uwsPort);
  }
  const hasBatch = (await post(servers.tollgate.port, '/v1/check/batch', `{"checks":[${ENVOY_BODY}]}`)).status === 200;
  console.error(`answer: ${answer.status} ${JSON.stringify(answer.headers)} ${answer.body}; batch endpoint: ${hasBatch}`);

  const subjects = [
    { id: 'bare', server: 'bare', path: '/json' },
    ...(servers.uws ? [{ id: 'uws bare', server: 'uws', path: '/json' }] : []),
    ...(servers.base ? [{ id: 'base /json', server: 'base', path: '/json' }] : []),
    { id: 'tollgate /json', server: 'tollgate', path: '/json' },
    ...(servers.baseRedis ? [{ id: 'base /json redis', server: 'baseRedis', path: '/json' }] : []),
    ...(servers.tollgateRedis ? [{ id: 'tollgate /json redis', server: 'tollgateRedis', path: '/json' }] : []),
    ...(hasBatch ? BATCH_SIZES.map((n) => ({ id: `tollgate batch ${n}`, server: 'tollgate', path: '/v1/check/batch', batch: n })) : []),
    // The same batches on the Redis store: the node's cost per check when callers batch (the fleet model's input).
    ...(hasBatch && servers.tollgateRedis ? BATCH_SIZES.map((n) => ({ id: `tollgate batch ${n} redis`, server: 'tollgateRedis', path: '/v1/check/batch', batch: n })) : []),
  ];
  if (ONLY !== undefined) subjects.splice(0, subjects.length, ...subjects.filter(({ id }) => id === 'bare' || ONLY.some((part) => id.includes(part))));
  let offset = 0;
  const measure = async (subject, durationS) => {
    const before = snapshotCpu();
    const run = await runWrk(servers[subject.server].port, subject.path, subject.batch, (offset += 1_237), work, durationS);
    const cpu = cpuBetween(before, snapshotCpu());
    const checks = run.requests * (subject.batch ?? 1);
    const redisUs = cpu.servers.redis === undefined ? undefined : ((cpu.servers.redis * cpu.seconds) / checks) * 1e6;
    return { ...run, checks, redisUsPerCheck: redisUs, serverCpuS: cpu.servers[subject.server] * cpu.seconds, usPerCheck: ((cpu.servers[subject.server] * cpu.seconds) / checks) * 1e6, foreignCores: cpu.foreignCores, loadavg1: loadavg()[0] };
  };
  for (const subject of subjects) await measure(subject, 2); // warm-up: JIT, connections
  const samples = [];
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const subject of repeat % 2 === 0 ? subjects : [...subjects].reverse()) {
      const sample = { subject: subject.id, repeat, ...(await measure(subject, DURATION_S)) };
      samples.push(sample);
      console.error(`r${repeat} ${subject.id.padEnd(18)} ${String(sample.checks).padStart(8)} checks ${sample.usPerCheck.toFixed(1).padStart(6)} µs CPU/check non-2xx ${sample.non2xx} load ${sample.loadavg1.toFixed(2)} foreign ${sample.foreignCores.toFixed(2)} cores`);
    }
  }
  // Redis last: the nodes on it stop first.
  for (const [name, server] of Object.entries(servers)) if (name !== 'redis') await stopChild(server);
  if (servers.redis !== undefined) await stopChild(servers.redis);
  removeRedisDirs();

  const environment = { at: new Date().toISOString(), cpus: `${cpus().length} × ${cpus()[0]?.model}`, node: process.version, command: `node bench/service-floor.js ${argv.join(' ')}`.trim() };
  const rows = subjects.map(({ id }) => {
    const runs = samples.filter((s) => s.subject === id);
    const ratios = runs.map((s) => s.usPerCheck / samples.find((b) => b.subject === 'bare' && b.repeat === s.repeat).usPerCheck);
    return { id, usPerCheck: median(runs.map((s) => s.usPerCheck)), all: runs.map((s) => +s.usPerCheck.toFixed(1)), perSecond: median(runs.map((s) => s.checks / DURATION_S)), ratioToBare: median(ratios), ratios: ratios.map((r) => +r.toFixed(2)), non2xx: runs.reduce((sum, s) => sum + s.non2xx, 0), redisUsPerCheck: id.endsWith('redis') ? median(runs.map((s) => s.redisUsPerCheck)) : undefined, loadavg1: runs.map((s) => +s.loadavg1.toFixed(1)) };
  });
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', 'service-floor.json'), JSON.stringify({ environment, rows, samples }, null, 2));
  console.log(`${environment.at}, ${environment.cpus}, node ${environment.node}: ${environment.command}\n`);
  console.log('| subject | µs CPU per check, median (the repeats) | ÷ bare, median (per repeat) | checks/s | non-2xx | load average (1 min) |\n|---|---:|---:|---:|---:|---|');
  for (const r of rows) {
    const redis = r.redisUsPerCheck === undefined ? '' : ` + Redis ${r.redisUsPerCheck.toFixed(1)}`;
    console.log(`| ${r.id} | **${r.usPerCheck.toFixed(1)}**${redis} (${r.all.join(' / ')}) | ${r.ratioToBare.toFixed(2)} (${r.ratios.join(' / ')}) | ${Math.round(r.perSecond).toLocaleString('en-US')} | ${r.non2xx} | ${r.loadavg1.join(' / ')} |`);
  }
  if (PROFILE) {
    if (BASE !== undefined) await profile('base', join(work, 'base'), work);
    await profile('tollgate', join(work, 'tollgate'), work);
  }
  rmSync(work, { recursive: true, force: true });
}

await main();
process.exit(0);
