// Summarises a V8 .cpuprofile (from bench/memory-store.js "profile", or node --cpu-prof): the functions with the most self time.
//
//   node --expose-gc bench/memory-store.js --child '{"scenario":"hot-admitted","subject":"gcra","profile":"/tmp/gcra.cpuprofile"}'
//   node bench/profile-top.js /tmp/gcra.cpuprofile [count] [skip-ms] [--busy]
//
// skip-ms: leave out the samples of the profile's first that many ms (a server's start-up and warm-up).
// --busy: shares of the busy samples only ((idle) left out), for a server profiled across a run
// where it waited for other subjects.
import { readFileSync } from 'node:fs';

const busy = process.argv.includes('--busy');
const [file, countArg, skipArg] = process.argv.slice(2).filter((arg) => arg !== '--busy');
if (file === undefined) {
  console.error('usage: node bench/profile-top.js <file.cpuprofile> [count]');
  process.exit(1);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const selfUs = new Map();
let totalUs = 0;
let elapsedUs = 0;
const skipUs = Number(skipArg ?? 0) * 1000;
for (let i = 0; i < profile.samples.length; i++) {
  const node = byId.get(profile.samples[i]);
  const delta = profile.timeDeltas[i] ?? 0;
  elapsedUs += delta;
  if (elapsedUs < skipUs) continue;
  if (busy && node.callFrame.functionName === '(idle)') continue;
  totalUs += delta;
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url ? `${url.replace(/^.*\/(dist|bench|node_modules)\//, '$1/')}:${lineNumber + 1}` : '';
  const name = `${functionName || '(anonymous)'} ${where}`.trim();
  selfUs.set(name, (selfUs.get(name) ?? 0) + delta);
}
const rows = [...selfUs.entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 15));
console.log(`total ${(totalUs / 1000).toFixed(0)} ms sampled`);
for (const [name, us] of rows) console.log(`${((us / totalUs) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`);
