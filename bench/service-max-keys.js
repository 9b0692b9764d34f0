// RSS of `tollgate serve` (memory store) under a flood of distinct keys, with the default bound
// (--max-keys 1000000) and a smaller one: the memory store keeps at most --max-keys keys and evicts
// the least recently used, so its memory stops growing at the bound.
//
//   npm run build && flock /tmp/tollgate-bench.lock node bench/service-max-keys.js [--keys 1000000] [--small 100000] [--max-seconds 100]
//
// Per bound: node dist/cli/main.js serve --config examples/rules --max-keys N (a child process on a free
// loopback port, killed by PID), then wrk (2 threads, 64 connections) sends --keys POST /json checks
// of classic.yaml's 5 marketing messages a day per to_user, each with its own to_user (a day-long
// window: no key expires during the run) (wrk is stopped once the store has seen that many keys: its key count plus evictions). VmRSS and
// VmHWM (peak) are read from /proc/<pid>/status after start and after the flood, and the store's
// key count and evictions from /metrics. No peer: envoyproxy/ratelimit keeps no counters of its own.
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { children, freePort, startChild, stopChild, waitForPort } from './support/children.js';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const KEYS = option('keys', 1_000_000);
const SMALL = option('small', 100_000);
const THREADS = 2;
/** Longest flood per bound: the run stops there even if fewer keys were sent (reported). */
const MAX_SECONDS = option('max-seconds', 100);

/** wrk script: every request a new to_user ("<thread>-<n>") under a 5-a-day rule, so no key expires during the run. */
const WRK_SCRIPT = `
local next_id = 1
function setup(thread) thread:set("tid", next_id); next_id = next_id + 1 end
local sent = 0
local headers = { ["Content-Type"] = "application/json" }
function request()
  sent = sent + 1
  return wrk.format("POST", "/json", headers, '{"domain":"classic","descriptors":[{"entries":[{"key":"message_type","value":"marketing"},{"key":"to_user","value":"' .. tid .. '-' .. sent .. '"}]}]}')
end
`;

function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/** wrk's thread:stop() ends sending, not the run: so wrk is stopped (SIGINT, by PID) once the store has seen KEYS keys. */
async function runWrk(port, adminPort, script) {
  const started = Date.now();
  const wrk = execFile('wrk', [`-t${THREADS}`, '-c64', '-d600s', '-s', script, `http://127.0.0.1:${port}/json`]);
  children.set(wrk.pid, { name: 'wrk', proc: wrk });
  const exited = new Promise((resolve) => wrk.once('exit', resolve));
  wrk.once('exit', () => children.delete(wrk.pid));
  let seen = 0;
  while (seen < KEYS && wrk.exitCode === null && Date.now() - started < MAX_SECONDS * 1000) {
    await sleep(500);
    seen = (await metric(adminPort, 'tollgate_memory_store_keys')) + (await metric(adminPort, 'tollgate_memory_store_evictions_total'));
  }
  const seconds = (Date.now() - started) / 1000;
  wrk.kill('SIGINT');
  await exited;
  return { seconds, perSecond: seen / seconds };
}

/** A sample from /metrics, on the admin listener. */
async function metric(adminPort, name) {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  return Number(text.split('\n').find((line) => line.startsWith(`${name} `))?.split(' ')[1]);
}

async function flood(maxKeys, script) {
  const port = await freePort();
  const adminPort = await freePort();
  const args = ['dist/cli/main.js', 'serve', '--config', 'examples/rules', '--port', String(port), '--grpc-port', '0', '--admin-port', String(adminPort), '--host', '127.0.0.1', '--log-level', 'warn', '--drain-delay', '0', '--max-keys', String(maxKeys)];
  const child = startChild(`serve --max-keys ${maxKeys}`, process.execPath, args, { cwd: ROOT });
  try {
    await waitForPort(child, port);
    const before = memoryOf(child.pid);
    const load = await runWrk(port, adminPort, script);
    const after = memoryOf(child.pid);
    const keys = await metric(adminPort, 'tollgate_memory_store_keys');
    const evictions = await metric(adminPort, 'tollgate_memory_store_evictions_total');
    return { maxKeys, before, after, load, keys, evictions, sent: keys + evictions };
  } finally {
    await stopChild(child);
  }
}

const script = join(mkdtempSync(join(tmpdir(), 'tollgate-max-keys-')), 'flood.lua');
writeFileSync(script, WRK_SCRIPT);
const rows = [];
for (const maxKeys of [1_000_000, SMALL]) rows.push(await flood(maxKeys, script));
const mb = (value) => value.toFixed(0);
console.log(`\n${KEYS.toLocaleString('en')} distinct keys, POST /json, wrk -t${THREADS} -c64, ${new Date().toISOString()}\n`);
console.log('| --max-keys | RSS after start (MB) | RSS after flood (MB) | peak RSS (MB) | keys held | evictions | distinct keys sent | checks/s |');
console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const row of rows) {
  console.log(`| ${row.maxKeys.toLocaleString('en')} | ${mb(row.before.rssMb)} | ${mb(row.after.rssMb)} | ${mb(row.after.peakMb)} | ${row.keys.toLocaleString('en')} | ${row.evictions.toLocaleString('en')} | ${row.sent.toLocaleString('en')} | ${Math.round(row.load.perSecond).toLocaleString('en')} |`);
}
