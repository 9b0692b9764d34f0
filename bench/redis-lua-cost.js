// Redis time per call of Tollgate's scripts, two builds side by side: each build's lean script per
// algorithm (EVALSHA), its lean library (FCALL, where the build has one) and its batch script
// deciding 64 requests, driven by redis-benchmark (50 clients, 10,000 random keys) on one private
// redis-server, rounds interleaved; `INFO commandstats` µs per call. Redis's own CPU per call is
// what the machine's other load disturbs least (it still does: read the spread).
//
//   npm run build && node bench/redis-lua-cost.js --a /tmp/before/dist [--b dist] [--rounds 4] [--calls 60000] [--clients 50] [--only batch]
//
// --clients 1: one call in flight, a lone decision's Redis time without other clients' calls between.
// --peer: also rate-limiter-flexible's RateLimiterRedis script (read from node_modules, EVALSHA, 1 point a 60 s key).
//
// Writes bench/results/redis-lua-cost.json.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './support/children.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = dirname(HERE);
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? argv[argv.indexOf(`--${name}`) + 1] : fallback);
if (option('a', '') === '') throw new Error('give --a <dist directory of the build to compare against>');
const BUILDS = { a: resolve(option('a', '')), b: resolve(option('b', join(ROOT, 'dist'))) };
const ROUNDS = Number(option('rounds', '4'));
const CALLS = option('calls', '60000');
const ALGORITHMS = ['fixed-window', 'gcra', 'token-bucket'];
const CLIENTS = option('clients', '50');
/** A lean script's arguments, admitted for the whole run: 7 numbers before the policy became one text (single.lua's header). */
const LEAN_ARGS = ['60000', '1000000', '1000000', '1000000', '0', '1', '1'];
const LEAN_ARGS_POLICY_TEXT = ['60000 1000000 1000000 1000000 0', '1', '1'];

const port = await freePort();
const server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
process.on('exit', () => server.exitCode === null && process.kill(server.pid, 'SIGTERM'));
const cli = (...args) => execFileSync('redis-cli', ['-p', String(port), ...args], { stdio: 'pipe', maxBuffer: 1 << 26 }).toString().trim();
for (let i = 0; ; i++) {
  await sleep(100);
  try {
    if (cli('PING') === 'PONG') break;
  } catch (error) {
    if (i === 50) throw error;
  }
}

/** The commands to time, per build: [label, redis-benchmark arguments after the options]. */
async function commandsOf(side, distDir) {
  const scripts = await import(pathToFileURL(join(distDir, 'store', 'redis', existsSync(join(distDir, 'store', 'redis', 'lua.js')) ? 'lua.js' : 'scripts.js')).href);
  const commands = [];
  const protocol = await import(pathToFileURL(join(distDir, 'store', 'redis', 'protocol.js')).href);
  const leanArgs = protocol.SINGLE_ARGS_ON_REDIS_TIME === 3 ? LEAN_ARGS_POLICY_TEXT : LEAN_ARGS;
  for (const algorithm of ALGORITHMS) {
    const lean = scripts.SINGLE_SCRIPTS[algorithm];
    cli('SCRIPT', 'LOAD', lean.source);
    commands.push([`${side} ${algorithm} lean EVALSHA`, ['EVALSHA', lean.sha1, '1', `${side}:${algorithm}:__rand_int__`, ...leanArgs]]);
    const name = scripts.LEAN_LIBRARY?.functions[algorithm];
    if (name !== undefined) {
      if (!cli('FUNCTION', 'LIST').includes(scripts.LEAN_LIBRARY.name)) cli('FUNCTION', 'LOAD', scripts.LEAN_LIBRARY.source);
      commands.push([`${side} ${algorithm} lean FCALL`, ['FCALL', name, '1', `${side}:${algorithm}:__rand_int__`, ...leanArgs]]);
    }
  }
  // The batch script: 64 fixed-window requests of one policy on keys of one hash tag (one call of a full batch).
  cli('SCRIPT', 'LOAD', scripts.DECIDE_SCRIPT.source);
  const keys = Array.from({ length: 64 }, (_, i) => `${side}:{batch:__rand_int__}:${i}`);
  // now (Redis TIME), one policy record (fixed-window, 60 s, 1M; protocol.ts policyRecord's 9 fields, no block), then 64 groups of one request: size 1, policy 1, consume, cost 1.
  const args = ['', '1', '3', '60000', '1000000', '1000000', '1000000', '0', '0', '1', '0', '64', ...Array.from({ length: 64 }, () => ['1', '1', '1', '1']).flat()];
  commands.push([`${side} fixed-window batch of 64 EVALSHA`, ['EVALSHA', scripts.DECIDE_SCRIPT.sha1, '64', ...keys, ...args]]);
  return commands;
}

/** rate-limiter-flexible's consume script, as its RateLimiterRedis sends it. */
function peerCommands() {
  const file = readFileSync(join(ROOT, 'node_modules', 'rate-limiter-flexible', 'lib', 'RateLimiterRedis.js'), 'utf8');
  const source = /incrTtlLuaScript = `([^`]*)`/.exec(file)?.[1];
  if (source === undefined) throw new Error('rate-limiter-flexible: its script was not found in lib/RateLimiterRedis.js');
  const sha1 = cli('SCRIPT', 'LOAD', source.replaceAll('\\\n', '\n'));
  return [['peer rate-limiter-flexible EVALSHA', ['EVALSHA', sha1, '1', 'peer:__rand_int__', '1', '60']]];
}

// --only <text>: just the commands whose label contains it (e.g. "batch").
const only = option('only', '');
const commands = [...(await commandsOf('a', BUILDS.a)), ...(await commandsOf('b', BUILDS.b)), ...(argv.includes('--peer') ? peerCommands() : [])].filter(([label]) => label.includes(only));
const samples = Object.fromEntries(commands.map(([label]) => [label, []]));
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? commands : [...commands].reverse();
  for (const [label, command] of order) {
    cli('CONFIG', 'RESETSTAT');
    const calls = label.includes('batch') ? String(Math.ceil(Number(CALLS) / 16)) : CALLS;
    execFileSync('redis-benchmark', ['-p', String(port), '-c', CLIENTS, '-n', calls, '-r', '10000', '-q', ...command], { stdio: 'pipe' });
    const stats = cli('INFO', 'commandstats');
    const usec = Number(new RegExp(`cmdstat_${command[0].toLowerCase()}:calls=\\d+,usec=\\d+,usec_per_call=([\\d.]+)`).exec(stats)?.[1]);
    samples[label].push(usec);
  }
}
for (const [label, values] of Object.entries(samples)) {
  const sorted = [...values].sort((x, y) => x - y);
  console.log(`${label.padEnd(40)} µs per call ${values.map((v) => v.toFixed(2)).join(' / ')} (median ${sorted[Math.floor((sorted.length - 1) / 2)].toFixed(2)}, min ${sorted[0].toFixed(2)})`);
}
mkdirSync(join(HERE, 'results'), { recursive: true });
const git = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
writeFileSync(join(HERE, 'results', 'redis-lua-cost.json'), JSON.stringify({ date: new Date().toISOString(), git, builds: BUILDS, rounds: ROUNDS, calls: CALLS, samples }, null, 2));
process.exit(0);
