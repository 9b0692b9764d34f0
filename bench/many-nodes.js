// Many nodes (issue 14): throughput of N = 1, 2, 3 `tollgate serve` processes sharing one Redis,
// and N = 1, 2, 3 sharing a 3-master Redis Cluster, under one closed-loop load on loopback.
//
//   npm run build && node bench/many-nodes.js [--rounds 3] [--duration 5] [--warmup 1]
//       [--concurrency 64] [--values 100000] [--algorithm fixed-window] [--nodes 1,2,3]
//       [--topologies single,cluster] [--deadline-ms 5000] [--quiet-limit 0.25] [--quiet-wait 30]
//       [--retry-foreign 0.3] [--attempts 3] [--out many-nodes]
//   node bench/many-nodes.js --report bench/results/many-nodes.json    # reprint a saved run's tables
//
// Starts, as child processes on free loopback ports killed by PID at the end (nothing else is
// ever signalled): one redis-server and a 3-master Redis Cluster (bench/support/redis.js), and
// three `node dist/cli/main.js serve` nodes on each (a copy of dist/ in a temp dir, --deadline-ms 5000
// so no answer comes from the failure mode's in-process fallback; degraded answers are counted and
// reported). All six nodes stay up for the whole run; a configuration with N nodes drives the first
// N of its topology, the others idle.
//
// Load: bench/many-nodes-client.js in its own process, a raw-socket HTTP/1.1 client keeping
// --concurrency requests in flight (one per keep-alive connection, connections spread evenly over
// the N nodes), POST /v1/check with the value cycling over --values values: every check is admitted
// (limit 1e9 per hour) and Redis holds one key per value. --warmup s, then --duration s timed.
// Rounds alternate the configurations (order reversed on odd rounds); the tables give medians.
// Before each sample the script waits (up to --quiet-wait s) until processes other than its own use
// at most --quiet-limit cores, and records what they used during the sample ("other"); a sample
// during which they used more than --retry-foreign cores is run again (at most --attempts times in
// all), and the one with the least foreign CPU is kept (the others are counted in the JSON).
//
// Per sample: checks/s, p50 / p99 latency (client side, µs), the cores used by each process group
// (nodes, Redis, the load generator, everything else on the machine), and Redis's own work per
// check: EVALSHA calls per check (a node batches the checks of one tick into one script call per
// shard), Redis's usec per EVALSHA and per check (INFO commandstats), and Redis CPU per check
// (INFO cpu). Writes every sample to bench/results/<out>.json and prints Markdown tables.
import { readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';

import { commandExists, quietWaiter } from './support/cpu.js';
import { removeRedisDirs, startRedisCluster, startRedisServer } from './support/redis.js';
import { drive, fmt, machine, median, saveRun, startNode, stopEverything, summarize, workDir } from './support/service-nodes.js';


const argv = process.argv.slice(2);
const raw = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : argv[index + 1];
};
const ROUNDS = Number(raw('rounds', 3));
const DURATION_S = Number(raw('duration', 5));
const WARMUP_S = Number(raw('warmup', 1));
const CONCURRENCY = Number(raw('concurrency', 64));
const VALUES = Number(raw('values', 100_000));
const ALGORITHM = raw('algorithm', 'fixed-window');
const NODE_COUNTS = raw('nodes', '1,2,3').split(',').map(Number);
const TOPOLOGIES = raw('topologies', 'single,cluster').split(',');
const DEADLINE_MS = Number(raw('deadline-ms', 5000));
const QUIET_LIMIT = Number(raw('quiet-limit', 0.25));
const QUIET_WAIT_S = Number(raw('quiet-wait', 30));
const RETRY_FOREIGN = Number(raw('retry-foreign', 0.3));
const ATTEMPTS = Number(raw('attempts', 3));
const OUT = raw('out', 'many-nodes');
const MAX_NODES = Math.max(...NODE_COUNTS);

const RULES = `domain: bench
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000000, algorithm: ${ALGORITHM} }
`;

/** The cores of one sample, grouped: the driven nodes, the idle nodes, Redis, the load generator, others. */
function groupCores(cpu, topology, n) {
  const group = { nodes: 0, idleNodes: 0, redis: 0, loadGenerator: 0 };
  for (const [name, cores] of Object.entries(cpu.servers)) {
    if (name === 'load-generator') group.loadGenerator += cores;
    else if (name.startsWith('redis') || name.startsWith('cluster')) group.redis += cores;
    else if (name.startsWith(`node-${topology}-`) && Number(name.slice(name.lastIndexOf('-') + 1)) < n) group.nodes += cores;
    else group.idleNodes += cores;
  }
  return { ...group, machine: cpu.machineCores, steal: cpu.stealCores, foreign: cpu.foreignCores };
}

/** Node CPU per check (µs): the driven nodes' cores ÷ checks/s, the steadiest per-node figure. */
const nodeCpuUs = (sample) => (sample.cores.nodes * 1e6) / sample.summary.perSecond;

/** The Markdown report of a run: `options` as written to the JSON (so --report can redo it). */
function report(info, options, samples) {
  const { ROUNDS: rounds, DURATION_S: duration, WARMUP_S: warmup, CONCURRENCY: concurrency, VALUES: values, ALGORITHM: algorithm } = options;
  const { NODE_COUNTS: counts, TOPOLOGIES: topologies, RETRY_FOREIGN: retryForeign } = options;
  const lines = [];
  lines.push(`Machine: nproc ${info.nproc} (${info.cpuModel}), Node ${info.node}, Redis ${info.redis}, git ${info.commit}, ${info.date}`);
  lines.push(`Load: ${concurrency} in flight (raw-socket HTTP/1.1 client, its own process, same machine), ${values} values, ${algorithm}, ${warmup} s warm-up + ${duration} s, ${rounds} rounds; medians.`);
  lines.push('');
  lines.push('| Redis | nodes | checks/s | × 1 node, median [per round] | p50 ms | p99 ms | cores: nodes / Redis / load gen. / other | node CPU µs per check | EVALSHA per check | Redis µs per EVALSHA | Redis µs per check (commandstats) | Redis CPU µs per check |');
  lines.push('|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|');
  for (const topology of topologies) {
    for (const n of counts) {
      const mine = samples.filter((s) => s.topology === topology && s.nodes === n);
      const ratios = mine.map((s) => {
        const base = samples.find((b) => b.topology === topology && b.nodes === counts[0] && b.round === s.round);
        return base ? s.summary.perSecond / base.summary.perSecond : NaN;
      });
      const m = (key) => median(mine.map((s) => s.summary[key]));
      const c = (key) => median(mine.map((s) => s.cores[key]));
      const cores = `${fmt(c('nodes'), 2)} / ${fmt(c('redis'), 2)} / ${fmt(c('loadGenerator'), 2)} / ${fmt(c('foreign'), 2)}`;
      const redis = `${fmt(m('evalshaPerCheck'), 3)} | ${fmt(m('usecPerEvalsha'), 1)} | ${fmt(m('redisUsecPerCheck'), 1)} | ${fmt(m('redisCpuUsPerCheck'), 1)}`;
      lines.push(
        `| ${topology === 'single' ? 'one server' : '3-master Cluster'} | ${n} | ${fmt(m('perSecond'))} | ${fmt(median(ratios), 2)} [${ratios.map((r) => fmt(r, 2)).join(', ')}] | ${fmt(m('p50Us') / 1000, 2)} | ${fmt(m('p99Us') / 1000, 2)} | ${cores} | ${fmt(median(mine.map(nodeCpuUs)))} | ${redis} |`,
      );
    }
  }
  const bad = samples.filter((s) => s.summary.non200 > 0 || s.summary.degraded > 0 || s.summary.errors > 0);
  lines.push('');
  lines.push(bad.length === 0 ? 'Every timed check was answered 200 by Redis (no 429, no degraded answer, no socket error).' : `Samples with non-200, degraded or failed checks: ${bad.map((s) => `${s.topology}/${s.nodes} r${s.round}: non-200 ${s.summary.non200}, degraded ${s.summary.degraded}, errors ${s.summary.errors}`).join('; ')}`);
  const reruns = samples.reduce((sum, s) => sum + (s.discardedForeignCores?.length ?? 0), 0);
  const noisy = samples.filter((s) => s.cores.foreign > retryForeign).length;
  lines.push(`Re-run for other processes' load: ${reruns} sample(s); kept samples still above ${retryForeign} foreign cores: ${noisy} of ${samples.length}.`);
  lines.push(`Machine busy (cores, median of samples): ${fmt(median(samples.map((s) => s.cores.machine)), 2)} of ${info.nproc}; steal ${fmt(median(samples.map((s) => s.cores.steal)), 2)}; other processes at most ${fmt(Math.max(...samples.map((s) => s.cores.foreign)), 2)} cores during a sample.`);
  return lines.join('\n');
}

async function main() {
  for (const command of ['redis-server', 'redis-cli', 'nproc']) if (!commandExists(command)) throw new Error(`${command} is not on PATH`);
  const info = machine();
  console.error(`many-nodes: ${JSON.stringify(info)}`);
  const dir = workDir({ bench: RULES });
  // Also when interrupted (children.js kills the children by PID and exits on SIGINT / SIGTERM).
  process.on('exit', () => {
    removeRedisDirs();
    rmSync(dir, { recursive: true, force: true });
  });
  const stores = {};
  const nodes = {};
  try {
    if (TOPOLOGIES.includes('single')) {
      const redis = await startRedisServer('redis-single');
      stores.single = { ports: [redis.port], args: ['--redis', redis.url] };
    }
    if (TOPOLOGIES.includes('cluster')) {
      const cluster = await startRedisCluster('cluster', 3);
      stores.cluster = { ports: cluster.servers.map((s) => s.port), args: ['--redis-cluster', cluster.nodes] };
    }
    for (const topology of TOPOLOGIES) {
      nodes[topology] = [];
      for (let i = 0; i < MAX_NODES; i++) nodes[topology].push(await startNode(dir, `node-${topology}-${i}`, 'bench', ['--deadline-ms', String(DEADLINE_MS), ...stores[topology].args]));
    }
    const configs = TOPOLOGIES.flatMap((topology) => NODE_COUNTS.map((n) => ({ topology, nodes: n })));
    const quiet = quietWaiter({ limitCores: QUIET_LIMIT, maxWaitS: QUIET_WAIT_S, sampleMs: 1000 });
    const samples = [];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? configs : [...configs].reverse();
      for (const config of order) {
        const ports = nodes[config.topology].slice(0, config.nodes).map((node) => node.port);
        let before;
        let sample;
        const discarded = [];
        for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
          const quietBefore = await quiet.wait();
          const tried = await drive({ ports, concurrency: CONCURRENCY, warmupS: WARMUP_S, durationS: DURATION_S, values: VALUES, domain: 'bench', key: 'user' }, stores[config.topology].ports);
          if (sample !== undefined && tried.cpu.foreignCores >= sample.cpu.foreignCores) discarded.push(tried.cpu.foreignCores);
          else {
            if (sample !== undefined) discarded.push(sample.cpu.foreignCores);
            sample = tried;
            before = quietBefore;
          }
          if (sample.cpu.foreignCores <= RETRY_FOREIGN) break;
          console.error(`  other processes used ${tried.cpu.foreignCores.toFixed(2)} cores during ${config.topology} × ${config.nodes}; ${attempt + 1 < ATTEMPTS ? 'again' : `kept the quietest (${sample.cpu.foreignCores.toFixed(2)})`}`);
        }
        const entry = { ...config, round, before, discardedForeignCores: discarded, loadavg1: loadavg()[0], ...sample, cores: groupCores(sample.cpu, config.topology, config.nodes) };
        entry.summary = summarize(entry);
        samples.push(entry);
        console.error(
          `round ${round} ${config.topology} × ${config.nodes}: ${fmt(entry.summary.perSecond)} checks/s, p50 ${fmt(entry.summary.p50Us / 1000, 2)} ms, p99 ${fmt(entry.summary.p99Us / 1000, 2)} ms, ` +
            `EVALSHA/check ${fmt(entry.summary.evalshaPerCheck, 3)}, Redis µs/check ${fmt(entry.summary.redisUsecPerCheck, 2)}, cores ${JSON.stringify(Object.fromEntries(Object.entries(entry.cores).map(([k, v]) => [k, Number(v.toFixed(2))])))}`,
        );
      }
    }
    const options = { ROUNDS, DURATION_S, WARMUP_S, CONCURRENCY, VALUES, ALGORITHM, NODE_COUNTS, TOPOLOGIES, DEADLINE_MS, QUIET_LIMIT, QUIET_WAIT_S, RETRY_FOREIGN, ATTEMPTS };
    const text = report(info, options, samples);
    console.log(text);
    // --out NAME writes bench/results/NAME.json; a path (with a /) is written as given.
    saveRun(OUT, { info, options, quietWaitedMs: quiet.waitedMs(), samples, report: text });
  } finally {
    await stopEverything(Object.values(nodes), dir);
  }
}

const REPORT = raw('report', undefined);
const run = REPORT === undefined ? main() : Promise.resolve().then(() => {
  // Reprints the tables of a saved run: node bench/many-nodes.js --report bench/results/many-nodes.json
  const saved = JSON.parse(readFileSync(REPORT, 'utf8'));
  console.log(report(saved.info, { RETRY_FOREIGN, ...saved.options }, saved.samples));
});
run.catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
