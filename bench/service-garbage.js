// Garbage per request of the decision service's /json, against node:http servers answering the
// same request, in one run: every server runs under `node --trace-gc` and takes the same wrk load;
// garbage = bytes the young-generation collections freed (before − after, per scavenge) ÷ requests
// answered. Also the collections' pauses, which are what a request arriving during one waits for.
//
//   npm run build && node bench/service-garbage.js [--repeats 3] [--duration 8]
//
// Subjects (child processes on free loopback ports, killed by PID):
//   hello           bench/service-hello.js http (node:http, 200 "hello world", body not read)
//   same-response   bench/service-variants.js same-response: reads and JSON.parses the body,
//                   answers Tollgate's exact headers and body, no decision
//   tollgate-mem    node dist/cli/main.js serve --config examples/rules (memory store)
//   tollgate-redis  the same with --redis on its own redis-server (--save '' --appendonly no)
//   tollgate-mem-before  with --before DIR: tollgate-mem from another checkout's build (DIR/dist,
//                   e.g. main's in a worktree), for garbage before/after in one run
// --subjects a,b,...: only these (default: all but tollgate-mem-before, which --before adds).
// Writes bench/results/service-garbage.json and prints a Markdown table (medians of the repeats).
import { mkdtempSync, readFileSync, statSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFile, execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort, stopChild } from './support/children.js';
import { scavenges, startTraced } from './support/gc-trace.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const REPEATS = option('repeats', 3);
const DURATION_S = option('duration', 8);
const textOption = (name) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : undefined);
const BEFORE = textOption('before');
const ONLY = textOption('subjects')?.split(',');

const WRK_SCRIPT = `
local N = 100000
local counter = 0
local offset = math.random(0, N)
local floor = math.floor
local headers = { ["Content-Type"] = "application/json" }
function request()
  local n = (offset + counter) % N
  counter = counter + 1
  local ip = "10." .. floor(n / 65536) .. "." .. (floor(n / 256) % 256) .. "." .. (n % 256)
  return wrk.format("POST", "/json", headers, '{"domain":"per_ip","descriptors":[{"entries":[{"key":"remote_address","value":"' .. ip .. '"}]}]}')
end
`;

function runWrk(port, durationS, script) {
  return new Promise((resolve, reject) =>
    execFile('wrk', ['-t2', '-c64', `-d${durationS}s`, '-s', script, `http://127.0.0.1:${port}/json`], (error, stdout) => {
      if (error) return reject(error);
      const requests = Number(/(\d+) requests in/.exec(stdout)?.[1]);
      const perSecond = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
      const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0);
      resolve({ requests, perSecond, non2xx });
    }),
  );
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function main() {
  const workDir = mkdtempSync(join(tmpdir(), 'tollgate-garbage-'));
  const script = join(workDir, 'post.lua');
  writeFileSync(script, WRK_SCRIPT);
  const redisPort = await freePort();
  const pidFile = join(workDir, 'redis.pid');
  execFileSync('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes', '--pidfile', pidFile, '--dir', workDir]);
  const serve = (extra, root = ROOT) => (port) => [join(root, 'dist', 'cli', 'main.js'), 'serve', '--config', join(ROOT, 'examples', 'rules'), '--port', String(port), '--grpc-port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--log-level', 'silent', ...extra];
  const subjects = [
    { id: 'hello', args: (port) => [join(HERE, 'service-hello.js'), 'http', String(port)] },
    { id: 'same-response', args: (port) => [join(HERE, 'service-variants.js'), 'same-response', String(port)] },
    { id: 'tollgate-mem', args: serve([]) },
    ...(BEFORE !== undefined ? [{ id: 'tollgate-mem-before', args: serve([], BEFORE) }] : []),
    { id: 'tollgate-redis', args: serve(['--redis', `redis://127.0.0.1:${redisPort}`]) },
  ].filter(({ id }) => ONLY === undefined || ONLY.includes(id) || (id === 'tollgate-mem-before' && BEFORE !== undefined));
  const samples = [];
  try {
    for (const subject of subjects) subject.server = await startTraced(subject.id, subject.args, workDir);
    for (const subject of subjects) await runWrk(subject.server.port, 3, script); // warm-up
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      for (const subject of repeat % 2 ? [...subjects].reverse() : subjects) {
        const from = statSync(subject.server.logFile).size;
        const load = await runWrk(subject.server.port, DURATION_S, script);
        await sleep(200);
        const gcs = scavenges(readFileSync(subject.server.logFile, 'utf8').slice(from));
        const freed = gcs.reduce((sum, gc) => sum + gc.freed, 0);
        const pauses = gcs.map((gc) => gc.pauseMs).sort((a, b) => a - b);
        const sample = {
          subject: subject.id,
          repeat,
          ...load,
          scavenges: gcs.length,
          garbageBytesPerRequest: freed / load.requests,
          pauseMs: { median: median(pauses), max: pauses.at(-1) ?? 0, total: pauses.reduce((a, b) => a + b, 0) },
        };
        samples.push(sample);
        console.error(`r${repeat} ${subject.id.padEnd(15)} ${Math.round(load.perSecond)}/s ${(sample.garbageBytesPerRequest / 1024).toFixed(1)} KB/request, ${gcs.length} scavenges, pause median ${sample.pauseMs.median?.toFixed(2)} max ${sample.pauseMs.max.toFixed(2)} ms`);
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
  const rows = subjects.map(({ id }) => {
    const mine = samples.filter((s) => s.subject === id);
    return {
      id,
      perSecond: median(mine.map((s) => s.perSecond)),
      kbPerRequest: median(mine.map((s) => s.garbageBytesPerRequest)) / 1024,
      scavengesPer10k: median(mine.map((s) => (s.scavenges / s.requests) * 10_000)),
      pauseMedian: median(mine.map((s) => s.pauseMs.median)),
      pauseMax: Math.max(...mine.map((s) => s.pauseMs.max)),
    };
  });
  console.log('| server | requests/s | garbage KB/request | scavenges per 10k requests | scavenge pause median / max ms |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.id} | ${Math.round(r.perSecond)} | ${r.kbPerRequest.toFixed(1)} | ${r.scavengesPer10k.toFixed(1)} | ${r.pauseMedian.toFixed(2)} / ${r.pauseMax.toFixed(2)} |`);
  mkdirSync(join(HERE, 'results'), { recursive: true });
  const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  writeFileSync(join(HERE, 'results', 'service-garbage.json'), JSON.stringify({ date: new Date().toISOString(), git, node: process.version, repeats: REPEATS, durationS: DURATION_S, rows, samples }, null, 2));
}

await main();
