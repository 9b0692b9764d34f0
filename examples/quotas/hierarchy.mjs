// An org > team > user budget (examples/rules/hierarchy.yaml) decided in one all-or-nothing check:
// team search spends its 100 a minute, then a request with room at the org and the user is refused
// by the team, named in the status, and no level spends for it.
import { createLimiter, loadRules, memoryStore } from 'tollgate';

const limiter = createLimiter({ store: memoryStore(), rules: await loadRules('examples/rules/hierarchy.yaml') });
const levels = (user) => [[['org', 'acme']], [['org', 'acme'], ['team', 'search']], [['org', 'acme'], ['team', 'search'], ['user', user]]].map((pairs) => ({ entries: pairs.map(([key, value]) => ({ key, value })) }));
const now = Date.parse('2026-11-29T12:00:00Z');

await limiter.check({ domain: 'hierarchy', descriptors: levels('7').slice(0, 2), hits: 100, now });
const result = await limiter.check({ domain: 'hierarchy', descriptors: levels('8'), now: now + 1_000 });
console.log(`overall: ${result.overallCode}`);
for (const status of result.statuses) console.log(`${status.code.padEnd(10)} ${status.currentLimit.name.padEnd(12)} remaining ${status.limitRemaining}`);
await limiter.close();
