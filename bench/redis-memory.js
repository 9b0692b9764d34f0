// Redis memory per key at 1M keys, Tollgate's Redis store against rate-limiter-flexible's
// RateLimiterRedis, on a single Redis and on a 3-master Redis Cluster, in one run.
//
//   npm run build && node bench/redis-memory.js [--keys 1000000] [--in-flight 256]
//
// For each subject and topology: fresh servers (redis-server --save '' --appendonly no, on free
// loopback ports, started here and stopped by their PIDs), INFO used_memory summed over the
// masters before and after one admitted decision on each of `keys` distinct keys (`user:0` …),
// `in-flight` decisions at a time; (after − before) ÷ keys. Policies: 10 per day, so that no key
// expires while a fill runs (a bucket's key lives until it is full again: 100 per hour would be
// 36 s, shorter than a 1M-key fill on the Cluster here). The peer uses a points/duration limiter
// (10 points per 86,400 s) with the same keys (its fixed window). Writes bench/results/redis-memory.json and prints a table.
//
// A subject is an algorithm or `rlflex`, optionally `@<limit>[/<window>]` (another policy: a gcra or
// bucket remainder of 10,000 or more is stored as its own integer object, below that Redis's shared
// one; gcra@20011/30d stores 15,192 and keeps each key 129 s) and `:short` (no key prefix and keys `0` … `lfls`, base 36: names of at most 12 bytes, the
// smallest allocation), e.g. SUBJECTS=gcra@1000000,gcra:short,rlflex:short.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRequire } from 'node:module';
import { freePort } from './support/children.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const require = createRequire(import.meta.url);
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const KEYS = option('keys', 1_000_000);
const IN_FLIGHT = option('in-flight', 256);
const SUBJECTS = (process.env.SUBJECTS ?? 'fixed-window,token-bucket,gcra,sliding-window,rlflex').split(',');

// TOLLGATE_DIST=<dir>: another build's dist (e.g. before a layout change), for an A/B in one run.
const DIST = process.env.TOLLGATE_DIST ?? join(ROOT, 'dist');
const { createLimiter, redisStore } = await import(pathToFileURL(join(DIST, 'index.js')).href);

async function startServer(workDir, extra = []) {
  const port = await freePort();
  const dir = join(workDir, String(port));
  mkdirSync(dir);
  const pidFile = join(dir, 'redis.pid');
  execFileSync('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes', '--pidfile', pidFile, '--dir', dir, ...extra]);
  for (let i = 0; i < 100; i++) {
    try {
      // The server that answers must be the one just started (not one still closing on that port).
      const info = execFileSync('redis-cli', ['-p', String(port), 'INFO', 'server'], { stdio: 'pipe' }).toString();
      if (/process_id:(\d+)/.exec(info)?.[1] === readFileSync(pidFile, 'utf8').trim()) return { port, pidFile };
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error(`redis-server on ${port} did not start`);
}

async function stopServer(server) {
  let pid;
  try {
    pid = Number(readFileSync(server.pidFile, 'utf8'));
    process.kill(pid, 'SIGTERM');
  } catch {
    return; // already gone
  }
  for (let i = 0; i < 200; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return; // exited
    }
    await sleep(25);
  }
}

async function startTopology(kind, workDir) {
  if (kind === 'single') return { servers: [await startServer(workDir)], kind };
  const servers = [];
  for (let i = 0; i < 3; i++) servers.push(await startServer(workDir, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf']));
  execFileSync('redis-cli', ['--cluster', 'create', ...servers.map((s) => `127.0.0.1:${s.port}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'pipe' });
  for (const server of servers) {
    for (let i = 0; !/cluster_state:ok/.test(execFileSync('redis-cli', ['-p', String(server.port), 'CLUSTER', 'INFO']).toString()); i++) {
      if (i > 200) throw new Error('cluster did not come up');
      await sleep(50);
    }
  }
  return { servers, kind };
}

function usedMemory(topology) {
  let total = 0;
  for (const server of topology.servers) total += Number(/used_memory:(\d+)/.exec(execFileSync('redis-cli', ['-p', String(server.port), 'INFO', 'memory']).toString())[1]);
  return total;
}

function keyCount(topology) {
  let total = 0;
  for (const server of topology.servers) total += Number(execFileSync('redis-cli', ['-p', String(server.port), 'DBSIZE']).toString().trim());
  return total;
}

/** `decide(i)` for the subject on the topology, and a close. */
function makeSubject(subject, topology) {
  const nodes = topology.servers.map((s) => ({ host: '127.0.0.1', port: s.port }));
  const [, algorithm, limitText, window = '1d', short] = /^([a-z-]+)(?:@(\d+)(?:\/(\w+))?)?(:short)?$/.exec(subject);
  const limit = limitText === undefined ? 10 : Number(limitText);
  const keyOf = short ? (i) => i.toString(36) : (i) => `user:${i}`;
  if (algorithm === 'rlflex') {
    const client = topology.kind === 'single' ? new Redis({ host: '127.0.0.1', port: nodes[0].port }) : new Redis.Cluster(nodes);
    const limiter = new RateLimiterRedis({ storeClient: client, points: limit, duration: 86_400 });
    return { decide: (i) => limiter.consume(keyOf(i), 1), close: () => client.quit() };
  }
  const keyPrefix = short ? '' : undefined;
  const store = topology.kind === 'single' ? redisStore({ url: `redis://127.0.0.1:${nodes[0].port}`, keyPrefix }) : redisStore({ cluster: nodes, keyPrefix });
  // Filling as fast as possible: a slow answer must not be answered by a failure mode (which stores nothing).
  const limiter = createLimiter({ store, failureMode: 'throw', deadlineMs: 30_000 });
  const policy = { algorithm, limit, window };
  return {
    ready: () => store.ready(),
    decide: async (i) => {
      const decision = await limiter.limit(keyOf(i), policy);
      if (!decision.allowed || decision.reason !== undefined) throw new Error(`user:${i}: ${JSON.stringify(decision)}`);
    },
    close: () => limiter.close(),
  };
}

async function fill(decide) {
  let next = 0;
  const worker = async () => {
    while (next < KEYS) await decide(next++);
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

async function main() {
  const rows = [];
  for (const kind of (process.env.TOPOLOGIES ?? 'single,cluster').split(',')) {
    for (const subject of SUBJECTS) {
      const workDir = mkdtempSync(join(tmpdir(), 'tollgate-redis-memory-'));
      const topology = await startTopology(kind, workDir);
      try {
        const target = makeSubject(subject, topology);
        await target.ready?.();
        await target.decide(-1); // connect, load the script
        const before = usedMemory(topology);
        const started = Date.now();
        await fill(target.decide);
        const seconds = (Date.now() - started) / 1000;
        await target.close();
        const keys = keyCount(topology) - 1;
        const after = usedMemory(topology);
        const row = { topology: kind, subject, keys, bytesPerKey: (after - before) / KEYS, fillSeconds: seconds };
        if (keys !== KEYS) {
          for (const server of topology.servers) console.error(server.port, execFileSync('redis-cli', ['-p', String(server.port), 'DBSIZE']).toString().trim(), execFileSync('redis-cli', ['-p', String(server.port), 'CLUSTER', 'NODES']).toString());
          throw new Error(`${kind} ${subject}: ${keys} keys stored, expected ${KEYS}`);
        }
        rows.push(row);
        console.error(`${kind.padEnd(8)} ${subject.padEnd(15)} ${row.bytesPerKey.toFixed(1)} B/key (${keys} keys, filled in ${seconds.toFixed(1)} s)`);
      } finally {
        for (const server of topology.servers) await stopServer(server);
        rmSync(workDir, { recursive: true, force: true });
      }
    }
  }
  console.log('| subject | single Redis B/key | 3-master Cluster B/key |');
  console.log('|---|---:|---:|');
  for (const subject of SUBJECTS) {
    const of = (kind) => rows.find((r) => r.subject === subject && r.topology === kind)?.bytesPerKey.toFixed(1) ?? '–';
    console.log(`| ${subject} | ${of('single')} | ${of('cluster')} |`);
  }
  mkdirSync(join(HERE, 'results'), { recursive: true });
  const redisVersion = execFileSync('redis-server', ['--version']).toString().trim();
  const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
  const out = process.env.RESULTS ?? 'redis-memory.json';
  writeFileSync(join(HERE, 'results', out), JSON.stringify({ date: new Date().toISOString(), git, dist: DIST, redis: redisVersion, keys: KEYS, inFlight: IN_FLIGHT, rows }, null, 2));
  process.exit(0);
}

await main();
