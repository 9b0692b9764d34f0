// Per mode (issue 14): checks/s, latency and Redis work of `tollgate serve` nodes on one Redis in
// the exact mode, with the over-limit cache, with token leases and local-first, under one
// closed-loop HTTP load on loopback, N = 1 and 3 nodes.
//
//   npm run build && node bench/service-modes.js [--workload hot|spread] [--rounds 3] [--duration 4]
//       [--warmup 1] [--nodes 1,3] [--modes exact,cached,lease,local-first] [--concurrency 64]
//       [--lease 5] [--sync-ms 100] [--out service-modes-hot]
//   node bench/service-modes.js --report bench/results/service-modes-hot.json
//
// Workloads (POST /v1/check, the value cycling over the workload's values):
//   hot     64 values, a fixed window of 10 per second each: the load offers each value far more
//           than its limit (an abusive tenant, an attack), so most checks are denied;
//   spread  100,000 values, 10^9 an hour: every check admitted, Redis holds one key per value.
// Modes (one set of nodes each, started once, all on the same Redis):
//   exact        --local-cache-keys 0: every check one decision in Redis (batched per tick);
//   cached       the over-limit cache (serve's default): a denied value is answered by the node
//                until its retry time;
//   lease        `lease_size` in the rule (--lease units per store call), cache off;
//   local-first  `sync_interval_ms` in the rule (--sync-ms), cache off.
// Rounds interleave every (mode, nodes) pair, the order reversed on odd rounds; medians. Per
// sample: checks/s, p50 / p99 at the client, node CPU µs per check, EVALSHA per check, Redis CPU
// µs per check, and the checks admitted (200) against what the limits allow: in the hot workload
// the exact mode admits at most 64 × 10 per second; lease must not admit more than exact,
// local-first may, within its bound (docs/scaling.md).
import { readFileSync, rmSync } from 'node:fs';
import { commandExists, quietWaiter } from './support/cpu.js';
import { redisCli, removeRedisDirs, startRedisServer } from './support/redis.js';
import { drive, fmt, machine, median, saveRun, startNode, stopEverything, summarize, workDir } from './support/service-nodes.js';

const argv = process.argv.slice(2);
const raw = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : argv[index + 1];
};

const WORKLOAD = raw('workload', 'hot');
const WORKLOADS = {
  hot: { values: 64, limit: 'unit: second, requests_per_unit: 10' },
  spread: { values: 100_000, limit: 'unit: hour, requests_per_unit: 1000000000' },
};
if (!(WORKLOAD in WORKLOADS)) throw new Error(`--workload must be hot or spread, got ${WORKLOAD}`);
const ROUNDS = Number(raw('rounds', 3));
const DURATION_S = Number(raw('duration', 4));
const WARMUP_S = Number(raw('warmup', 1));
const CONCURRENCY = Number(raw('concurrency', 64));
const NODE_COUNTS = raw('nodes', '1,3').split(',').map(Number);
const MODES = raw('modes', 'exact,cached,lease,local-first').split(',');
const LEASE = Number(raw('lease', 5));
const SYNC_MS = Number(raw('sync-ms', 100));
const OUT = raw('out', `service-modes-${WORKLOAD}`);
const MAX_NODES = Math.max(...NODE_COUNTS);

/** The rule and the serve flags of each mode. */
function modeSetup(mode) {
  const { limit } = WORKLOADS[WORKLOAD];
  const extra = { exact: '', cached: '', lease: `, lease_size: ${LEASE}`, 'local-first': `, sync_interval_ms: ${SYNC_MS}` }[mode];
  if (extra === undefined) throw new Error(`unknown mode ${mode}`);
  const rules = `domain: bench\ndescriptors:\n  - key: user\n    rate_limit: { ${limit}${extra} }\n`;
  return { rules, flags: ['--deadline-ms', '5000', ...(mode === 'cached' ? [] : ['--local-cache-keys', '0'])] };
}

function report(info, options, samples) {
  const { WORKLOAD: workload, ROUNDS: rounds, DURATION_S: duration, WARMUP_S: warmup, CONCURRENCY: concurrency, NODE_COUNTS: counts, MODES: modes } = options;
  const lines = [];
  lines.push(`Machine: nproc ${info.nproc} (${info.cpuModel}), Node ${info.node}, Redis ${info.redis}, git ${info.commit}, ${info.date}`);
  lines.push(`Workload ${workload}: ${WORKLOADS[workload].values} values, ${WORKLOADS[workload].limit}; lease ${options.LEASE}, sync ${options.SYNC_MS} ms; ${concurrency} in flight, ${warmup} s warm-up + ${duration} s, ${rounds} rounds; medians.`);
  lines.push('');
  lines.push('| nodes | mode | checks/s | × exact [per round] | p50 ms | p99 ms | node CPU µs per check | EVALSHA per check | Redis CPU µs per check | admitted per s | × exact admitted |');
  lines.push('|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const n of counts) {
    for (const mode of modes) {
      const mine = samples.filter((s) => s.nodes === n && s.mode === mode);
      const exactOf = (s) => samples.find((b) => b.nodes === n && b.mode === 'exact' && b.round === s.round);
      const ratios = mine.map((s) => s.summary.perSecond / (exactOf(s)?.summary.perSecond ?? NaN));
      const admittedRatios = mine.map((s) => s.admittedPerSecond / (exactOf(s)?.admittedPerSecond ?? NaN));
      const m = (key) => median(mine.map((s) => s.summary[key]));
      const nodeCpu = median(mine.map((s) => (s.cores * 1e6) / s.summary.perSecond));
      lines.push(
        `| ${n} | ${mode} | ${fmt(m('perSecond'))} | ${fmt(median(ratios), 2)} [${ratios.map((r) => fmt(r, 2)).join(', ')}] | ${fmt(m('p50Us') / 1000, 2)} | ${fmt(m('p99Us') / 1000, 2)} | ${fmt(nodeCpu)} | ${fmt(m('evalshaPerCheck'), 3)} | ${fmt(m('redisCpuUsPerCheck'), 1)} | ${fmt(median(mine.map((s) => s.admittedPerSecond)))} | ${fmt(median(admittedRatios), 3)} |`,
      );
    }
  }
  const bad = samples.filter((s) => s.summary.degraded > 0 || s.summary.errors > 0);
  lines.push('');
  lines.push(bad.length === 0 ? 'No degraded answer, no socket error.' : `Samples with degraded or failed checks: ${bad.map((s) => `${s.mode}/${s.nodes} r${s.round}`).join(', ')}`);
  return lines.join('\n');
}

async function main() {
  for (const command of ['redis-server', 'redis-cli', 'nproc']) if (!commandExists(command)) throw new Error(`${command} is not on PATH`);
  const info = machine();
  console.error(`service-modes: ${JSON.stringify(info)}`);
  const setups = Object.fromEntries(MODES.map((mode) => [mode, modeSetup(mode)]));
  const dir = workDir(Object.fromEntries(MODES.map((mode) => [mode, setups[mode].rules])));
  process.on('exit', () => {
    removeRedisDirs();
    rmSync(dir, { recursive: true, force: true });
  });
  const nodes = {};
  try {
    const redis = await startRedisServer('redis-modes');
    for (const mode of MODES) {
      nodes[mode] = [];
      for (let i = 0; i < MAX_NODES; i++) nodes[mode].push(await startNode(dir, `node-${mode}-${i}`, mode, [...setups[mode].flags, '--redis', redis.url]));
    }
    const configs = MODES.flatMap((mode) => NODE_COUNTS.map((n) => ({ mode, nodes: n })));
    const quiet = quietWaiter({ limitCores: 0.25, maxWaitS: 20, sampleMs: 1000 });
    const samples = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const config of round % 2 === 0 ? configs : [...configs].reverse()) {
        await quiet.wait();
        redisCli(redis.port, 'FLUSHALL');
        const driven = nodes[config.mode].slice(0, config.nodes);
        const spec = { ports: driven.map((node) => node.port), concurrency: CONCURRENCY, warmupS: WARMUP_S, durationS: DURATION_S, values: WORKLOADS[WORKLOAD].values, domain: 'bench', key: 'user' };
        const sample = await drive(spec, [redis.port]);
        const cores = driven.reduce((sum, node) => sum + (sample.cpu.servers[node.name] ?? 0), 0);
        const entry = { ...config, round, ...sample, cores, admittedPerSecond: (sample.statuses[200] ?? 0) / sample.seconds };
        entry.summary = summarize(entry);
        samples.push(entry);
        console.error(`round ${round} ${config.mode} × ${config.nodes}: ${fmt(entry.summary.perSecond)} checks/s, p99 ${fmt(entry.summary.p99Us / 1000, 2)} ms, admitted ${fmt(entry.admittedPerSecond)}/s, EVALSHA/check ${fmt(entry.summary.evalshaPerCheck, 3)}`);
      }
    }
    const options = { WORKLOAD, ROUNDS, DURATION_S, WARMUP_S, CONCURRENCY, NODE_COUNTS, MODES, LEASE, SYNC_MS };
    const text = report(info, options, samples);
    console.log(text);
    saveRun(OUT, { info, options, samples, report: text });
  } finally {
    await stopEverything(Object.values(nodes), dir);
  }
}

const REPORT = raw('report', undefined);
const run = REPORT === undefined ? main() : Promise.resolve().then(() => {
  const saved = JSON.parse(readFileSync(REPORT, 'utf8'));
  console.log(report(saved.info, saved.options, saved.samples));
});
run.catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
