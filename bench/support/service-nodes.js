// `tollgate serve` nodes under closed-loop HTTP load, for bench/many-nodes.js and
// bench/service-modes.js: a copy of dist/ to run from, nodes as child processes on free ports
// (killed by PID), the load generator (bench/many-nodes-client.js) with CPU and Redis counters
// snapshotted around its timed window, and one sample's summary.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { children, freePort, startChild, stopChild, waitForPort } from './children.js';
import { cpuBetween, snapshotCpu } from './cpu.js';
import { redisCounters, redisDelta, removeRedisDirs } from './redis.js';

const BENCH = dirname(dirname(fileURLToPath(import.meta.url)));
const ROOT = dirname(BENCH);

export const median = (values) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

export const fmt = (value, digits = 0) => (Number.isFinite(value) ? value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a');

/** The machine and the code a run measured. */
export function machine() {
  const model = /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpus()[0]?.model;
  const nproc = execFileSync('nproc', { encoding: 'utf8' }).trim();
  const redis = /v=([\d.]+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1];
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    // Not a git checkout.
  }
  return { nproc: Number(nproc), availableParallelism: availableParallelism(), cpuModel: model, node: process.version, redis, commit, date: new Date().toISOString() };
}

/**
 * dist/, package.json and one rules directory per entry of `rules` ({ name: yaml }) in a temp dir:
 * a rebuild during the run cannot mix versions.
 */
export function workDir(rules) {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-nodes-'));
  cpSync(join(ROOT, 'dist'), join(dir, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), readFileSync(join(ROOT, 'package.json')));
  for (const [name, yaml] of Object.entries(rules)) {
    mkdirSync(join(dir, `rules-${name}`));
    writeFileSync(join(dir, `rules-${name}`, 'bench.yaml'), yaml);
  }
  return dir;
}

/** One `tollgate serve` on free ports, with the rules of `rulesName` and more flags. */
export async function startNode(dir, name, rulesName, flags) {
  const port = await freePort();
  const grpcPort = await freePort();
  const args = [join(dir, 'dist', 'cli', 'main.js'), 'serve', '--config', join(dir, `rules-${rulesName}`), '--port', String(port), '--grpc-port', String(grpcPort), '--admin-port', '0'];
  args.push('--host', '127.0.0.1', '--log-level', 'warn', '--drain-delay', '0', ...flags);
  const child = startChild(name, process.execPath, args);
  await waitForPort(child, port);
  return { name, port, child };
}

/** Runs the load generator with `spec`; snapshots CPU and Redis counters when its timed window starts and ends. */
export function drive(spec, redisPorts) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(BENCH, 'many-nodes-client.js'), JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.set(proc.pid, { name: 'load-generator', proc });
    let stderr = '';
    proc.stderr.on('data', (chunk) => (stderr += chunk));
    let start;
    let end;
    let result;
    createInterface({ input: proc.stdout }).on('line', (line) => {
      if (line === 'timed-start') start = { cpu: snapshotCpu(), redis: redisPorts.map(redisCounters) };
      else if (line === 'timed-end') end = { cpu: snapshotCpu(), redis: redisPorts.map(redisCounters) };
      else result = JSON.parse(line);
    });
    proc.on('exit', (code) => {
      children.delete(proc.pid);
      if (code !== 0 || !result || !start || !end) return reject(new Error(`load generator failed (${code}): ${stderr}`));
      resolve({ ...result, cpu: cpuBetween(start.cpu, end.cpu), redis: redisDelta(start.redis, end.redis) });
    });
  });
}

/** A sample's figures per check: throughput, latency, Redis script calls, time and CPU. */
export function summarize(sample) {
  const evalsha = sample.redis.commands.evalsha ?? { calls: 0, usec: 0 };
  const checks = sample.requests;
  return {
    perSecond: sample.perSecond,
    p50Us: sample.latencyUs.p50,
    p99Us: sample.latencyUs.p99,
    evalshaPerCheck: evalsha.calls / checks,
    usecPerEvalsha: evalsha.usec / evalsha.calls,
    redisUsecPerCheck: evalsha.usec / checks,
    redisCpuUsPerCheck: (sample.redis.cpuSeconds * 1e6) / checks,
    non200: checks - (sample.statuses[200] ?? 0),
    degraded: sample.degraded,
    errors: sample.errors,
  };
}

/** Writes a run to `out`: bench/results/<out>.json, or the path given when it has a `/`. */
export function saveRun(out, run) {
  const path = out.includes('/') ? out : join(BENCH, 'results', `${out}.json`);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(run, null, 1)}\n`);
}

/** Stops every node of `nodeLists` and every other child process, and removes the work dirs. */
export async function stopEverything(nodeLists, dir) {
  for (const list of nodeLists) await Promise.all(list.map((node) => stopChild(node.child)));
  for (const { name, proc } of [...children.values()]) await stopChild({ name, pid: proc.pid, proc });
  removeRedisDirs();
  rmSync(dir, { recursive: true, force: true });
}
