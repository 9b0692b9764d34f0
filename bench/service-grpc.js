// The decision service's gRPC ceiling, with a load generator that is not the bottleneck: h2load
// (Debian's nghttp2-client) POSTs a pre-encoded envoy.service.ratelimit.v3 RateLimitRequest to
// ShouldRateLimit over HTTP/2, against Tollgate and two servers answering a constant, in one run.
//
//   apt-get install -y nghttp2-client redis-server      # once; the script installs nothing
//   npm run build && node bench/service-grpc.js [--repeats 3] [--duration 8] [--streams 64] [--rate N] [--paired] [--only id,id] [--base DIR] [--out FILE]
//
// Subjects (child processes on free loopback ports, killed by PID):
//   grpc-hello   bench/service-hello.js grpc: @grpc/grpc-js answering a constant OK (no limiter)
//   h2-hello     bench/service-hello.js h2: node:http2 answering a pre-encoded constant reply with
//                grpc-status trailers (no gRPC library): the floor of gRPC in Node
//   h2-floor     the same with Tollgate's own response headers and trailers: the floor under
//                Tollgate's http2 server (one stream, headers, data, trailers; nothing else)
//   tollgate-mem-h2       node dist/cli/main.js serve (memory store), its --grpc-port on --grpc-server http2
//   tollgate-mem-grpcjs   the same on --grpc-server grpc-js
//   base-mem-h2           with --base DIR: tollgate-mem-h2 from another built checkout (DIR, e.g. a
//                         worktree of main), for before/after in one run
//   tollgate-redis-h2     the same as tollgate-mem-h2 with --redis on the script's own redis-server
//   tollgate-redis-grpcjs the same on --grpc-server grpc-js (the same Redis and keys: the admitted
//                         key never runs out, the denied one stays denied)
// Workloads: `admitted` (domain bench, one key, a limit of 4,294,967,295 per second: every call is
// decided and admitted) and `denied` (domain per_ip of examples/rules, one address: all
// OVER_LIMIT after the first 100). h2load sends one body, so both are a hot key; the HTTP bench
// covers the spread of keys.
// Load: `h2load -c 4 -m 16 -t 1` (64 streams in flight over 4 connections) for --duration s after
// 2 s of warm-up. Before measuring, one call per subject and workload through the official
// grpc-js client checks the answer (OK, or OVER_LIMIT for `denied`). h2load counts HTTP statuses,
// not gRPC trailers: the script also checks, through grpc-js again after each sample, that the
// server still answers as expected.
// Writes bench/results/service-grpc.json (or --out FILE) and prints a Markdown table (medians of the repeats).
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { freePort, startChild, stopChild, waitForPort } from './support/children.js';
import { commandExists, cpuBetween, snapshotCpu } from './support/cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const PROTO_DIR = join(ROOT, 'src', 'service', 'grpc', 'proto');
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const REPEATS = option('repeats', 3);
const DURATION_S = option('duration', 8);
const STREAMS = option('streams', 64);
// --rate N: N calls/s in all (h2load --rps, split over the connections) instead of as many as the
// server answers. Every subject then answers the same calls per second, so CPU per call compares
// like with like on a busy machine (at saturation, calls batch more per event-loop turn the more
// CPU a subject happens to get). 0: saturate.
const RATE = option('rate', 0);
// --only id,id: run these subjects (and grpc-hello, the baseline) only, for quick iterations.
const ONLY = argv.includes('--only') ? argv[argv.indexOf('--only') + 1].split(',') : undefined;
// --paired: each workload's subjects loaded at the same time, each by its own h2load (with --rate,
// the same calls/s each): on a shared machine they meet the same foreign load, so their CPU per
// call compares better than one run after another.
const PAIRED = argv.includes('--paired');
// --out FILE: the JSON results under bench/results/ (default service-grpc.json).
const OUT = argv.includes('--out') ? argv[argv.indexOf('--out') + 1] : 'service-grpc.json';
// --base DIR: also run tollgate-mem-h2 from that checkout (built), as base-mem-h2.
const BASE = argv.includes('--base') ? argv[argv.indexOf('--base') + 1] : undefined;
const CONNECTIONS = 4;
const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto'], { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true, oneofs: true, includeDirs: [PROTO_DIR] });
const method = definition['envoy.service.ratelimit.v3.RateLimitService'].ShouldRateLimit;

const WORKLOADS = {
  admitted: { domain: 'bench', descriptors: [{ entries: [{ key: 'client', value: 'load' }] }], expect: 'OK' },
  denied: { domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '192.0.2.7' }] }], expect: 'OVER_LIMIT' },
};

/** A length-prefixed gRPC message, as it goes on the wire. */
function grpcFrame(request) {
  const message = method.requestSerialize({ domain: request.domain, descriptors: request.descriptors, hits_addend: 0 });
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/** One call through the official client: the answer's overall code. */
function callOnce(port, request) {
  const Service = grpc.makeGenericClientConstructor({ ShouldRateLimit: method });
  const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) =>
    client.ShouldRateLimit({ domain: request.domain, descriptors: request.descriptors }, (error, reply) => {
      client.close();
      if (error) reject(error);
      else resolve(reply.overall_code);
    }),
  );
}

function runH2load(port, bodyFile, durationS) {
  const rate = RATE > 0 ? ['--rps', String(Math.ceil(RATE / CONNECTIONS))] : [];
  const args = ['-t', '1', '-c', String(CONNECTIONS), '-m', String(Math.ceil(STREAMS / CONNECTIONS)), ...rate, '-D', String(durationS), '-d', bodyFile, '-H', 'content-type: application/grpc', '-H', 'te: trailers', `http://127.0.0.1:${port}${PATH}`];
  return new Promise((resolve, reject) => {
    // The shell waits for h2load, then reads its own cutime/cstime: h2load's CPU time.
    const wrapper = 'h2load "$@"; rc=$?; echo "@@STAT $(cat /proc/$$/stat)"; exit $rc';
    execFile('sh', ['-c', wrapper, 'sh', ...args], { maxBuffer: 16 * 2 ** 20 }, (error, stdout) => {
      if (error) return reject(new Error(`h2load failed: ${error.message}\n${stdout}`));
      const perSecond = Number(/finished in [\d.]+\w+, ([\d.]+) req\/s/.exec(stdout)?.[1]);
      const done = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(stdout);
      const latency = /time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)/.exec(stdout);
      const us = (value, unit) => Number(value) * (unit === 's' ? 1e6 : unit === 'ms' ? 1e3 : 1);
      const stat = /@@STAT (.*)/.exec(stdout)?.[1] ?? '';
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      resolve({
        perSecond,
        done: Number(done?.[2]),
        succeeded: Number(done?.[3]),
        failed: Number(done?.[4]) + Number(done?.[5]),
        latencyUs: latency ? { min: us(latency[1], latency[2]), max: us(latency[3], latency[4]), mean: us(latency[5], latency[6]) } : undefined,
        loadGeneratorCpuSeconds: (Number(fields[13]) + Number(fields[14])) / 100,
        command: `h2load ${args.join(' ')}`,
      });
    });
  });
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function startSubjects(workDir, redisPort) {
  const rules = join(workDir, 'rules');
  cpSync(join(ROOT, 'examples', 'rules'), rules, { recursive: true });
  writeFileSync(join(rules, 'bench.yaml'), 'domain: bench\ndescriptors:\n  - key: client\n    rate_limit: { unit: second, requests_per_unit: 4294967295 }\n');
  const serve = (name, extra, root = ROOT) => async () => {
    const [http, grpcPort] = [await freePort(), await freePort()];
    const child = startChild(name, process.execPath, [join(root, 'dist', 'cli', 'main.js'), 'serve', '--config', rules, '--port', String(http), '--grpc-port', String(grpcPort), '--admin-port', '0', '--host', '127.0.0.1', '--log-level', 'silent', ...extra]);
    await waitForPort(child, grpcPort);
    return Object.assign(child, { grpcPort });
  };
  const hello = (name, mode) => async () => {
    const port = await freePort();
    const child = startChild(name, process.execPath, [join(HERE, 'service-hello.js'), mode, String(port), PROTO_DIR]);
    await waitForPort(child, port);
    return Object.assign(child, { grpcPort: port });
  };
  const redis = ['--redis', `redis://127.0.0.1:${redisPort}`];
  const subjects = [
    { id: 'grpc-hello', start: hello('grpc-hello', 'grpc'), constant: true },
    { id: 'h2-hello', start: hello('h2-hello', 'h2'), constant: true },
    { id: 'h2-floor', start: hello('h2-floor', 'h2-floor'), constant: true },
    ...(BASE === undefined ? [] : [{ id: 'base-mem-h2', start: serve('base-mem-h2', ['--grpc-server', 'http2'], BASE) }]),
    { id: 'tollgate-mem-h2', start: serve('tollgate-mem-h2', ['--grpc-server', 'http2']) },
    { id: 'tollgate-mem-grpcjs', start: serve('tollgate-mem-grpcjs', ['--grpc-server', 'grpc-js']) },
    { id: 'tollgate-redis-h2', start: serve('tollgate-redis-h2', ['--grpc-server', 'http2', ...redis]) },
    { id: 'tollgate-redis-grpcjs', start: serve('tollgate-redis-grpcjs', ['--grpc-server', 'grpc-js', ...redis]) },
  ].filter((subject) => ONLY === undefined || ONLY.includes(subject.id) || subject.id === 'grpc-hello');
  for (const subject of subjects) subject.server = await subject.start();
  return subjects;
}

async function main() {
  for (const command of ['h2load', 'redis-server']) {
    if (!commandExists(command)) {
      console.error(`bench/service-grpc.js needs ${command} (Debian: apt-get install -y ${command === 'h2load' ? 'nghttp2-client' : command})`);
      process.exit(1);
    }
  }
  const workDir = mkdtempSync(join(tmpdir(), 'tollgate-grpc-bench-'));
  const bodies = {};
  for (const [name, request] of Object.entries(WORKLOADS)) {
    bodies[name] = join(workDir, `${name}.bin`);
    writeFileSync(bodies[name], grpcFrame(request));
  }
  const redisPort = await freePort();
  const pidFile = join(workDir, 'redis.pid');
  execFileSync('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes', '--pidfile', pidFile, '--dir', workDir]);
  let subjects = [];
  const samples = [];
  try {
    subjects = await startSubjects(workDir, redisPort);
    const runs = subjects.flatMap((subject) => Object.keys(WORKLOADS).filter((w) => !subject.constant || w === 'admitted').map((workload) => ({ subject, workload })));
    for (const run of runs) {
      const answer = await callOnce(run.subject.server.grpcPort, WORKLOADS[run.workload]);
      // The denied workload's first 100 calls are admitted: spend them before checking.
      if (run.workload === 'denied') await runH2load(run.subject.server.grpcPort, bodies.denied, 1);
      const expected = run.subject.constant ? 'OK' : WORKLOADS[run.workload].expect;
      const settled = run.workload === 'denied' ? await callOnce(run.subject.server.grpcPort, WORKLOADS.denied) : answer;
      if (settled !== expected) throw new Error(`${run.subject.id} ${run.workload}: answered ${settled}, expected ${expected}`);
      await runH2load(run.subject.server.grpcPort, bodies[run.workload], 2); // warm-up
    }
    // --paired: the runs of one workload at once (each subject its own h2load), so every subject
    // meets the same foreign load at the same moments; otherwise one run after another.
    const groups = PAIRED ? Object.keys(WORKLOADS).map((w) => runs.filter((run) => run.workload === w)) : runs.map((run) => [run]);
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      for (const group of repeat % 2 ? [...groups].reverse() : groups) {
        const before = snapshotCpu();
        const loads = await Promise.all(group.map((run) => runH2load(run.subject.server.grpcPort, bodies[run.workload], DURATION_S)));
        const cpu = cpuBetween(before, snapshotCpu(), loads.reduce((sum, load) => sum + load.loadGeneratorCpuSeconds, 0));
        for (const [i, run] of group.entries()) {
          const load = loads[i];
          const still = await callOnce(run.subject.server.grpcPort, WORKLOADS[run.workload]);
          const serverCores = cpu.servers[run.subject.id] ?? 0;
          const sample = { subject: run.subject.id, workload: run.workload, repeat, ...load, serverCores, redisCores: cpu.servers.redis ?? 0, loadGeneratorCores: cpu.loadGeneratorCores, foreignCores: cpu.foreignCores, answerAfter: still };
          samples.push(sample);
          console.error(`r${repeat} ${run.subject.id.padEnd(15)} ${run.workload.padEnd(8)} ${Math.round(load.perSecond)}/s failed ${load.failed} | server ${serverCores.toFixed(2)} h2load ${cpu.loadGeneratorCores.toFixed(2)} foreign ${cpu.foreignCores.toFixed(2)} cores | then ${still}`);
        }
      }
    }
  } finally {
    for (const subject of subjects) if (subject.server) await stopChild(subject.server);
    try {
      process.kill(Number(readFileSync(pidFile, 'utf8')), 'SIGTERM');
    } catch {
      // already gone
    }
  }
  const rows = [];
  for (const subject of subjects) {
    for (const workload of Object.keys(WORKLOADS)) {
      const mine = samples.filter((s) => s.subject === subject.id && s.workload === workload);
      if (mine.length === 0) continue;
      const perRepeat = mine.map((s) => {
        const base = samples.find((b) => b.subject === 'grpc-hello' && b.repeat === s.repeat);
        return s.perSecond / base.perSecond;
      });
      // Tollgate on http2 against Tollgate on grpc-js, same store and workload, per repeat.
      const peerId = subject.id.endsWith('-h2') ? subject.id.replace(/-h2$/, '-grpcjs') : undefined;
      const perRepeatPeer = mine.map((s) => {
        const peer = samples.find((b) => b.subject === peerId && b.workload === workload && b.repeat === s.repeat);
        return peer === undefined ? NaN : s.perSecond / peer.perSecond;
      });
      // Server CPU per call against the node:http2 floor's, per repeat.
      const perCall = (s) => s.serverCores / s.perSecond;
      const perRepeatFloor = mine.map((s) => {
        const floor = samples.find((b) => b.subject === 'h2-floor' && b.repeat === s.repeat);
        return floor === undefined ? NaN : perCall(s) / perCall(floor);
      });
      rows.push({
        subject: subject.id,
        cpuXFloor: median(perRepeatFloor),
        workload,
        xGrpcJsTollgate: peerId === undefined ? undefined : median(perRepeatPeer),
        perSecond: median(mine.map((s) => s.perSecond)),
        all: mine.map((s) => Math.round(s.perSecond)),
        xGrpcHello: median(perRepeat),
        serverCores: median(mine.map((s) => s.serverCores)),
        cpuUsPerCall: median(mine.map((s) => (s.serverCores / s.perSecond) * 1e6)),
        loadGeneratorCores: median(mine.map((s) => s.loadGeneratorCores)),
        meanLatencyMs: median(mine.map((s) => (s.latencyUs?.mean ?? NaN) / 1000)),
      });
    }
  }
  console.log(`| server | workload | calls/s (the ${REPEATS} repeats) | × grpc-js constant | × Tollgate on grpc-js | server cores | server µs CPU/call | CPU/call × h2-floor | h2load cores | mean latency ms |`);
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    const peer = r.xGrpcJsTollgate === undefined || Number.isNaN(r.xGrpcJsTollgate) ? '–' : r.xGrpcJsTollgate.toFixed(2);
    console.log(`| ${r.subject} | ${r.workload} | ${Math.round(r.perSecond)} (${r.all.join(' / ')}) | ${r.xGrpcHello.toFixed(2)} | ${peer} | ${r.serverCores.toFixed(2)} | ${r.cpuUsPerCall.toFixed(0)} | ${Number.isNaN(r.cpuXFloor) ? '–' : r.cpuXFloor.toFixed(2)} | ${r.loadGeneratorCores.toFixed(2)} | ${r.meanLatencyMs.toFixed(2)} |`);
  }
  mkdirSync(join(HERE, 'results'), { recursive: true });
  const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  writeFileSync(join(HERE, 'results', OUT), JSON.stringify({ date: new Date().toISOString(), git, node: process.version, h2load: execFileSync('sh', ['-c', 'h2load --version | head -1']).toString().trim(), streams: STREAMS, connections: CONNECTIONS, rows, samples }, null, 2));
}

await main();
