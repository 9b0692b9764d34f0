// Before and after, with the peer, in one run: children of bench/memory-store.js (its `--child`
// measurements, one fresh process each) for several builds of Tollgate and for rate-limiter-flexible,
// interleaved round by round (order reversed on odd rounds). Prints, per subject, the medians of
// decisions/s (wall clock) and decisions per CPU-second of the child (less sensitive to other
// processes on a shared machine), and each Tollgate subject's ratio to the peer sample of the same
// round: median [min – max].
//
//   node bench/memory-store-ab.js --scenario many-keys --rounds 5 \
//     token-bucket-sync@/tmp/base/dist token-bucket-sync@dist rlflex
//
// A subject is `NAME[@DIST]`: NAME as bench/memory-store.js names subjects (token-bucket,
// token-bucket-sync, rlflex, ...), DIST a dist/ directory (another commit's build, in a worktree whose
// node_modules resolve its imports; default ./dist). Writes every sample to
// bench/results/memory-store-ab-SCENARIO.json.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './support/forked.js';

const HERE = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : argv[index + 1];
};
const rounds = Number(option('rounds', 5));
const scenario = option('scenario', 'many-keys');
const subjects = argv.filter((arg, i) => !arg.startsWith('--') && !argv[i - 1]?.startsWith('--'));
if (subjects.length === 0 || !subjects.some((s) => s.startsWith('rlflex'))) {
  console.error('usage: node bench/memory-store-ab.js [--scenario S] [--rounds N] SUBJECT[@DIST] ... rlflex');
  process.exit(2);
}

const loadBefore = loadavg();
const samples = [];
for (let round = 0; round < rounds; round++) {
  for (const subject of round % 2 === 0 ? subjects : [...subjects].reverse()) {
    const [name, dist] = subject.split('@');
    const spec = { scenario, subject: name, ...(dist === undefined ? {} : { distDir: resolve(dist) }) };
    const out = execFileSync(process.execPath, ['--expose-gc', join(HERE, 'memory-store.js'), '--child', JSON.stringify(spec)], { encoding: 'utf8' });
    const { result } = JSON.parse(out.trim().split('\n').at(-1));
    samples.push({ subject, round, ...result });
    process.stderr.write(`[${round + 1}/${rounds}] ${subject}: ${(result.opsPerSec / 1e6).toFixed(3)} M/s, ${(result.opsPerCpuSec / 1e6).toFixed(3)} M per CPU-s\n`);
  }
}

const peer = subjects.find((s) => s.startsWith('rlflex'));
const of = (subject, field) => samples.filter((s) => s.subject === subject).map((s) => s[field]);
const paired = (subject, field) => {
  const ours = of(subject, field);
  const theirs = of(peer, field);
  const ratios = ours.map((value, i) => value / theirs[i]);
  return `×${median(ratios).toFixed(2)} [${Math.min(...ratios).toFixed(2)} – ${Math.max(...ratios).toFixed(2)}]`;
};
const lines = ['| subject | decisions/s | per CPU-s | ×peer, wall | ×peer, CPU |', '|---|---:|---:|---:|---:|'];
for (const subject of subjects) {
  const cells = [`${(median(of(subject, 'opsPerSec')) / 1e6).toFixed(3)} M`, `${(median(of(subject, 'opsPerCpuSec')) / 1e6).toFixed(3)} M`];
  cells.push(subject === peer ? '1' : paired(subject, 'opsPerSec'), subject === peer ? '1' : paired(subject, 'opsPerCpuSec'));
  lines.push(`| ${subject} | ${cells.join(' | ')} |`);
}
const loadAfter = loadavg();
lines.push('', `${scenario}, ${rounds} rounds; load average ${loadBefore.map((v) => v.toFixed(1)).join(' ')} before, ${loadAfter.map((v) => v.toFixed(1)).join(' ')} after; ${cpus().length} × ${cpus()[0]?.model}`);
console.log(lines.join('\n'));
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(join(HERE, 'results', `memory-store-ab-${scenario}.json`), `${JSON.stringify({ date: new Date().toISOString(), scenario, rounds, subjects, loadBefore, loadAfter, samples }, null, 2)}\n`);
