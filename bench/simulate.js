// `tollgate simulate` throughput: lines per second replaying a synthetic 1M-line Combined log
// (10,000 client addresses, Zipf-like, a few bursty ones; 10 requests a second per address on
// fixed-window; logins per user on sliding-log) through the real command, as a process.
//   npm run build && flock /tmp/tollgate-bench.lock node bench/simulate.js [--lines N] [--runs R]
// Prints a markdown table (medians of R runs: wall time, CPU time (user + system), peak RSS); nothing to compare with: no other tool
// replays access logs against rate-limit rules.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { lines: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '3' } } });
const LINES = Number(values.lines);
const RUNS = Number(values.runs);
const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-simulate-'));
const RULES = `domain: api
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: login_user
    rate_limit: { unit: minute, requests_per_unit: 5, algorithm: sliding-log }
`;
const MAP = `requests:
  - domain: api
    descriptors: [{ entries: [{ key: remote_address, field: ip }] }]
  - domain: api
    when: { method: POST, path: /login }
    descriptors: [{ entries: [{ key: login_user, field: user }] }]
`;

/** A deterministic pseudo-random sequence (so every run replays the same log). */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

function writeLog(file, lines) {
  const next = random(42);
  const fd = openSync(file, 'w');
  const start = Date.UTC(2026, 10, 27, 10, 0, 0);
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  let chunk = '';
  for (let i = 0; i < lines; i++) {
    // 1,000 lines a second on average: a million lines span about 17 minutes.
    const time = new Date(start + Math.floor(i / 1_000) * 1_000);
    const stamp = `${String(time.getUTCDate()).padStart(2, '0')}/${months[time.getUTCMonth()]}/${time.getUTCFullYear()}:${String(time.getUTCHours()).padStart(2, '0')}:${String(time.getUTCMinutes()).padStart(2, '0')}:${String(time.getUTCSeconds()).padStart(2, '0')} +0000`;
    const rank = Math.floor(10_000 ** next()); // Zipf-like: low ranks far busier
    const ip = `10.${(rank >> 16) & 255}.${(rank >> 8) & 255}.${rank & 255}`;
    const login = next() < 0.02;
    const request = login ? 'POST /login HTTP/1.1' : `GET /v1/items/${rank % 97} HTTP/1.1`;
    const user = login ? `user${rank % 500}` : '-';
    chunk += `${ip} - ${user} [${stamp}] "${request}" 200 512 "-" "bench/1.0"\n`;
    if (chunk.length > 1 << 20) {
      writeSync(fd, chunk);
      chunk = '';
    }
  }
  writeSync(fd, chunk);
  closeSync(fd);
}

const log = join(dir, 'access.log');
const rules = join(dir, 'rules.yaml');
const map = join(dir, 'map.yaml');
writeFileSync(rules, RULES);
writeFileSync(map, MAP);
writeLog(log, LINES);
const megabytes = statSync(log).size / 1_048_576;

function median(list) {
  const sorted = [...list].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const cases = [
  ['rules as written', []],
  ['--algorithm fixed-window,sliding-window --compare-to sliding-log', ['--algorithm', 'fixed-window,sliding-window', '--compare-to', 'sliding-log']],
];
const rows = [];
try {
  for (const [name, extra] of cases) {
    const seconds = [];
    const rss = [];
    const cpu = [];
    for (let run = 0; run < RUNS; run++) {
      const began = process.hrtime.bigint();
      const result = spawnSync('/usr/bin/time', ['-f', '%M %U %S', process.execPath, 'dist/cli/main.js', 'simulate', '--rules', rules, '--log', log, '--map', map, '--json', ...extra], { encoding: 'utf8', maxBuffer: 1 << 28 });
      const elapsed = Number(process.hrtime.bigint() - began) / 1e9;
      if (result.status !== 0) throw new Error(`simulate failed: ${result.stderr}`);
      seconds.push(elapsed);
      const [kilobytes, user, system] = result.stderr.trim().split('\n').at(-1).split(' ').map(Number);
      rss.push(kilobytes / 1024);
      cpu.push(user + system);
      const report = JSON.parse(result.stdout);
      if (report.entries !== LINES) throw new Error(`replayed ${report.entries} of ${LINES} lines`);
    }
    const s = median(seconds);
    const c = median(cpu);
    rows.push(`| ${name} | ${LINES.toLocaleString('en')} | ${megabytes.toFixed(0)} MB | ${s.toFixed(2)} s | ${Math.round(LINES / s).toLocaleString('en')} | ${c.toFixed(2)} s | ${Math.round(LINES / c).toLocaleString('en')} | ${median(rss).toFixed(0)} MB |`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`node ${process.version}, ${RUNS} runs each (median), wall time of the whole process (start, rules, log, report)\n`);
console.log('| replay | lines | log size | wall time | lines/s (wall) | CPU time | lines/s (CPU) | peak RSS |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const row of rows) console.log(row);
