// Rule lookup cost per check, for a rules tree of 10 descriptors vs 10,000 (and 100,000):
// matching must cost one map lookup per entry, not grow with the number of rules.
//   npm run build && node bench/rules-lookup.js
// Prints a markdown table; medians of 5 runs of 1M lookups each, in one process.
import { compileRules } from '../dist/rules/index.js';
import { matchDescriptor } from '../dist/rules/match.js';

const location = { file: 'bench.yaml', line: 1, column: 1 };
const limit = { unit: 'minute', requestsPerUnit: 100, unitMultiplier: 1, unlimited: false, replaces: [], algorithm: 'fixed-window', softPercent: 0, failureMode: 'open', location };
const flags = { shadowMode: false, detailedMetric: false, valueToMetric: false, quotaMode: false, shareThreshold: false, location };

/** A domain with `size` descriptors: `size` exact values of one key, each with a nested key-only child, plus a few wildcards. */
function domainOf(size) {
  const descriptors = [];
  for (let i = 0; i < size; i++) {
    descriptors.push({ key: 'tenant', value: `t${i}`, rateLimit: limit, ...flags, descriptors: [{ key: 'user', rateLimit: limit, ...flags, descriptors: [] }] });
  }
  for (let i = 0; i < 5; i++) descriptors.push({ key: 'client', value: `app${i}-*`, rateLimit: limit, ...flags, descriptors: [] });
  descriptors.push({ key: 'tenant', rateLimit: limit, ...flags, descriptors: [] });
  return { domain: 'bench', descriptors, source: 'bench.yaml' };
}

function measure(size) {
  const root = compileRules([domainOf(size)]).domain('bench');
  const requests = Array.from({ length: 1024 }, (_, i) => [
    { key: 'tenant', value: `t${(i * 7919) % size}` },
    { key: 'user', value: `u${i}` },
  ]);
  const runs = [];
  let found = 0;
  for (let run = 0; run < 6; run++) {
    const n = 1_000_000;
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) if (matchDescriptor(root, 'bench', requests[i & 1023]) !== undefined) found++;
    const ns = Number(process.hrtime.bigint() - start) / n;
    if (run > 0) runs.push(ns); // the first run warms up the JIT
  }
  if (found === 0) throw new Error('nothing matched');
  runs.sort((a, b) => a - b);
  return runs[Math.floor(runs.length / 2)];
}

const rows = [10, 10_000, 100_000].map((size) => ({ size, ns: measure(size) }));
console.log('| descriptors in the domain | ns per lookup (2 entries, median of 5 × 1M) | × the 10-descriptor tree |');
console.log('|---:|---:|---:|');
for (const { size, ns } of rows) console.log(`| ${size.toLocaleString('en')} | ${ns.toFixed(0)} | ${(ns / rows[0].ns).toFixed(2)}× |`);
