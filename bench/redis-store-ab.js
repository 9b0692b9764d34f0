// Two builds of Tollgate's Redis store side by side (A/B), on one private redis-server: the same
// measurement child as bench/redis-store.js (`--child`, a fresh process per sample), rounds
// interleaved, the order of A and B alternating between rounds. For "did this change make the
// store slower": ratios within one run, on a shared machine.
//
//   npm run build && node bench/redis-store-ab.js --a /tmp/before/dist [--b dist] [--rounds 4]
//     [--duration 2000] [--algorithms fixed-window,gcra,token-bucket] [--scenarios seq,conc]
//
// Prints, per algorithm and scenario, each round's decisions/s for A and B, B/A, the p99 at 1 in
// flight and Redis µs per script call; writes bench/results/redis-store-ab.json.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './support/children.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
const A = resolve(option('a', ''));
const B = resolve(option('b', join(ROOT, 'dist')));
const ROUNDS = Number(option('rounds', '4'));
const DURATION = Number(option('duration', '2000'));
const ALGORITHMS = option('algorithms', 'fixed-window,gcra,token-bucket').split(',');
const SCENARIOS = option('scenarios', 'seq,conc').split(',');
if (option('a', '') === '') throw new Error('give --a <dist directory of the build to compare against>');

const port = await freePort();
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
process.on('exit', () => server.exitCode === null && process.kill(server.pid, 'SIGTERM'));
for (let i = 0; ; i++) {
  await sleep(100);
  try {
    if (execFileSync('redis-cli', ['-p', String(port), 'PING'], { stdio: 'pipe' }).toString().trim() === 'PONG') break;
  } catch (error) {
    if (i === 50) throw error;
  }
}

function sample(scenario, algorithm, distDir) {
  const spec = { scenario, subject: `tollgate:${algorithm}`, port, distDir, durationMs: DURATION, warmupMs: 1_000, repeat: 0 };
  const out = execFileSync(process.execPath, [join(HERE, 'redis-store.js'), '--child', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const result = JSON.parse(out.toString());
  // A sample whose decisions outnumber what its script calls can carry was partly answered without
  // Redis (a deadline missed on the loaded machine opened the store's breaker): not a measurement.
  const perCall = result.decisionsPerScriptCall ?? Infinity;
  const valid = perCall <= (scenario === 'seq' ? 1.001 : 64.001);
  return { perSecond: result.perSecond, p99: result.latencyUs?.p99, redisUs: result.redisUsPerScriptCall, foreignCores: result.foreignCores, perCall, valid };
}

function median(values) {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)];
}

const rows = [];
for (const scenario of SCENARIOS) {
  for (const algorithm of ALGORITHMS) {
    const row = { scenario, algorithm, a: [], b: [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
      for (const side of order) row[side].push(sample(scenario, algorithm, side === 'a' ? A : B));
    }
    const ratios = row.b.map((b, i) => (b.valid && row.a[i].valid ? b.perSecond / row.a[i].perSecond : NaN));
    const fmt = (samples, field, digits = 0) => samples.map((s) => (!s.valid ? 'invalid' : s[field] === undefined ? '–' : s[field].toFixed(digits))).join(' / ');
    const validRatios = ratios.filter((r) => !Number.isNaN(r));
    console.log(`${scenario} ${algorithm}: A ${fmt(row.a, 'perSecond')} per s, B ${fmt(row.b, 'perSecond')}; B/A ${ratios.map((r) => r.toFixed(2)).join(' / ')} (median ${median(validRatios).toFixed(2)})`);
    if (scenario === 'seq') console.log(`  p99 µs A ${fmt(row.a, 'p99')}, B ${fmt(row.b, 'p99')}`);
    console.log(`  Redis µs per script call A ${fmt(row.a, 'redisUs', 2)}, B ${fmt(row.b, 'redisUs', 2)}; foreign cores A ${fmt(row.a, 'foreignCores', 2)}, B ${fmt(row.b, 'foreignCores', 2)}`);
    rows.push({ ...row, ratios });
  }
}
mkdirSync(join(HERE, 'results'), { recursive: true });
const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
writeFileSync(join(HERE, 'results', 'redis-store-ab.json'), JSON.stringify({ date: new Date().toISOString(), git, a: A, b: B, rounds: ROUNDS, durationMs: DURATION, rows }, null, 2));
process.exit(0);
