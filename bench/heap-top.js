// Summarises a sampling heap profile (bench/support/heap-sampling.js): bytes allocated per request
// by function, self and inclusive (the project's own functions), for `requests` answered while it sampled.
//
//   node bench/heap-top.js /tmp/x.heapprofile <requests> [count]
import { readFileSync } from 'node:fs';
const [file, requestsArg, countArg] = process.argv.slice(2);
const requests = Number(requestsArg);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const self = new Map(); const incl = new Map(); let total = 0;
const name = (n) => { const { functionName, url, lineNumber } = n.callFrame; return `${functionName || '(anon)'} ${url ? url.replace(/^.*\/(dist|bench|node_modules)\//, '$1/').replace(/^node:/, 'node:') + ':' + (lineNumber + 1) : ''}`; };
function walk(node, stack) {
  const me = name(node);
  const own = node.selfSize;
  total += own;
  self.set(me, (self.get(me) ?? 0) + own);
  const s2 = [...stack, me];
  let sub = own; for (const c of node.children) sub += walk(c, s2);
  if (!stack.includes(me)) incl.set(me, (incl.get(me) ?? 0) + sub);
  return sub;
}
walk(profile.head, []);
const per = (b) => (b / requests).toFixed(0).padStart(6);
console.log(`total ${(total / 1e6).toFixed(1)} MB, ${per(total)} B/request`);
console.log('--- self');
for (const [n, b] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 40))) console.log(per(b), n);
console.log('--- inclusive (dist only)');
for (const [n, b] of [...incl].filter(([n]) => n.includes('dist/')).sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 40))) console.log(per(b), n);
