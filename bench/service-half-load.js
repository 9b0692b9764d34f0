// The decision service's p99 at half its own maximum (issue 32), before/after in one run: two
// builds of `tollgate serve` (memory store, examples/rules) and node:http hello world, each under
// `node --trace-gc`, measured the way bench/service.js measures its half-load row: the maximum by
// `wrk -t2 -c64`, then wrk paced by a Lua `delay()` (uniform in [0, 2·d] before each request, d
// calibrated by a 3 s run) to half of that server's median maximum; hello world at the rate of the
// first build. Rounds alternate the order. Beside each paced run: the young-generation
// collections it saw (per second, pause median / max, and the share of requests that could have
// arrived during one).
//
//   npm run build && node bench/service-half-load.js --before /tmp/main-checkout [--repeats 5] [--duration 8]
//     [--quiet-limit 0.25] [--quiet-wait 15]   (each run first waits that long at most for other processes to use that few cores)
//
// --before DIR: the other build (DIR/dist, e.g. main's in a git worktree). Servers are child
// processes on free loopback ports, killed by PID. Writes bench/results/service-half-load.json.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { stopChild } from './support/children.js';
import { scavenges, startTraced } from './support/gc-trace.js';
import { envoyWrkScript } from './support/wrk-script.js';
import { quietWaiter } from './support/cpu.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const text = (name) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : undefined);
const REPEATS = Number(text('repeats') ?? 5);
const DURATION_S = Number(text('duration') ?? 8);
const MAX_DURATION_S = Number(text('max-duration') ?? 5);
const BEFORE = text('before');
const CONNECTIONS = 64;
// Before each run: wait (up to --quiet-wait s) until other processes use at most --quiet-limit cores.
const quiet = quietWaiter({ limitCores: Number(text('quiet-limit') ?? 0.25), maxWaitS: Number(text('quiet-wait') ?? 15), sampleMs: 500 });
if (BEFORE === undefined) {
  console.error('usage: node bench/service-half-load.js --before DIR [--repeats 5] [--duration 8]');
  process.exit(2);
}

const script = (meanDelayMs) => envoyWrkScript({ meanDelayMs });

const UNIT_US = { us: 1, ms: 1000, s: 1_000_000 };
const microseconds = (value) => {
  const match = /^([\d.]+)(us|ms|s)$/.exec(value);
  return match ? Number(match[1]) * UNIT_US[match[2]] : NaN;
};

function runWrk(port, durationS, scriptFile) {
  return new Promise((resolve, reject) =>
    execFile('wrk', ['-t2', `-c${CONNECTIONS}`, `-d${durationS}s`, '--latency', '-s', scriptFile, `http://127.0.0.1:${port}/json`], (error, stdout) => {
      if (error) return reject(error);
      resolve({
        requests: Number(/(\d+) requests in/.exec(stdout)?.[1]),
        perSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]),
        p50Us: microseconds(/^\s+50%\s+(\S+)/m.exec(stdout)?.[1] ?? ''),
        p99Us: microseconds(/^\s+99%\s+(\S+)/m.exec(stdout)?.[1] ?? ''),
        non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0),
      });
    }),
  );
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** One wrk run against `server`, with the scavenges its log shows meanwhile. */
async function measure(server, durationS, scriptFile) {
  const { foreignBeforeCores } = await quiet.wait();
  const from = statSync(server.logFile).size;
  const load = await runWrk(server.port, durationS, scriptFile);
  await sleep(200);
  const pauses = scavenges(readFileSync(server.logFile, 'utf8').slice(from)).map((gc) => gc.pauseMs).sort((a, b) => a - b);
  const pausedMs = pauses.reduce((sum, pause) => sum + pause, 0);
  return { ...load, scavengesPerSecond: pauses.length / durationS, pauseMedianMs: median(pauses) ?? 0, pauseMaxMs: pauses.at(-1) ?? 0, pausedShare: pausedMs / (durationS * 1000), loadAverage: loadavg()[0], foreignBeforeCores };
}

async function main() {
  const workDir = mkdtempSync(join(tmpdir(), 'tollgate-half-'));
  const serve = (root) => (port) => [join(root, 'dist', 'cli', 'main.js'), 'serve', '--config', join(ROOT, 'examples', 'rules'), '--port', String(port), '--grpc-port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--log-level', 'silent'];
  const subjects = [
    { id: 'after', args: serve(ROOT) },
    { id: 'before', args: serve(BEFORE) },
    { id: 'hello', args: (port) => [join(HERE, 'service-hello.js'), 'http', String(port)] },
  ];
  const tollgates = subjects.slice(0, 2);
  const samples = [];
  const maxScript = join(workDir, 'max.lua');
  writeFileSync(maxScript, script());
  try {
    for (const subject of subjects) subject.server = await startTraced(subject.id, subject.args, workDir);
    for (const subject of tollgates) await runWrk(subject.server.port, 3, maxScript); // warm-up
    for (let round = 0; round < 3; round++) {
      for (const subject of round % 2 ? [...tollgates].reverse() : tollgates) {
        const sample = { kind: 'max', subject: subject.id, round, ...(await measure(subject.server, MAX_DURATION_S, maxScript)) };
        samples.push(sample);
        console.error(`max ${subject.id}: ${Math.round(sample.perSecond)}/s (load ${sample.loadAverage.toFixed(1)})`);
      }
    }
    const maxOf = (id) => median(samples.filter((s) => s.kind === 'max' && s.subject === id).map((s) => s.perSecond));
    for (const subject of subjects) {
      subject.rate = (subject.id === 'hello' ? maxOf('after') : maxOf(subject.id)) / 2;
      const d0 = (CONNECTIONS / subject.rate) * 1000;
      const calibrationScript = join(workDir, `${subject.id}-d0.lua`);
      writeFileSync(calibrationScript, script(d0));
      const calibration = await runWrk(subject.server.port, 3, calibrationScript);
      const cycleMs = (CONNECTIONS / calibration.perSecond) * 1000;
      subject.meanDelayMs = Math.max(0, d0 - (cycleMs - d0));
      subject.pacedScript = join(workDir, `${subject.id}-paced.lua`);
      writeFileSync(subject.pacedScript, script(subject.meanDelayMs));
      console.error(`half ${subject.id}: target ${Math.round(subject.rate)}/s, d ${subject.meanDelayMs.toFixed(2)} ms`);
    }
    for (let round = 0; round < REPEATS; round++) {
      for (const subject of round % 2 ? [...subjects].reverse() : subjects) {
        const sample = { kind: 'half', subject: subject.id, round, targetPerSecond: subject.rate, ...(await measure(subject.server, DURATION_S, subject.pacedScript)) };
        samples.push(sample);
        console.error(
          `r${round} ${subject.id.padEnd(6)} ${Math.round(sample.perSecond)}/s p50 ${(sample.p50Us / 1000).toFixed(2)} p99 ${(sample.p99Us / 1000).toFixed(2)} ms; ${sample.scavengesPerSecond.toFixed(1)} scavenges/s, pause median ${sample.pauseMedianMs.toFixed(2)} max ${sample.pauseMaxMs.toFixed(2)} ms (load ${sample.loadAverage.toFixed(1)}, others ${sample.foreignBeforeCores.toFixed(2)} cores before)`,
        );
      }
    }
  } finally {
    for (const subject of subjects) if (subject.server) await stopChild(subject.server);
  }
  console.log('| server | max/s (median) | half-load target/s | achieved/s | p50 ms | p99 ms (median; the rounds) | scavenges/s | pause median / max ms | time paused |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const subject of subjects) {
    const half = samples.filter((s) => s.kind === 'half' && s.subject === subject.id);
    const max = samples.filter((s) => s.kind === 'max' && s.subject === subject.id);
    const cell = (values, digits = 2) => median(values).toFixed(digits);
    console.log(
      `| ${subject.id} | ${max.length ? Math.round(median(max.map((s) => s.perSecond))) : '-'} | ${Math.round(subject.rate)} | ${Math.round(median(half.map((s) => s.perSecond)))} | ${cell(half.map((s) => s.p50Us / 1000))} | **${cell(half.map((s) => s.p99Us / 1000))}** (${half.map((s) => (s.p99Us / 1000).toFixed(2)).join(' / ')}) | ${cell(half.map((s) => s.scavengesPerSecond), 1)} | ${cell(half.map((s) => s.pauseMedianMs))} / ${Math.max(...half.map((s) => s.pauseMaxMs)).toFixed(2)} | ${(median(half.map((s) => s.pausedShare)) * 100).toFixed(2)}% |`,
    );
  }
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', 'service-half-load.json'), JSON.stringify({ date: new Date().toISOString(), node: process.version, before: BEFORE, repeats: REPEATS, durationS: DURATION_S, samples }, null, 2));
}

await main();
