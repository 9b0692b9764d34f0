// A Pro customer spends its month, is refused, and gets a new month at midnight in Paris
// (23:00 UTC on 30 November); explicit times, so the output is always the same.
import { createLimiter, loadRules, memoryStore } from 'tollgate';

const limiter = createLimiter({ store: memoryStore(), rules: await loadRules('examples/quotas/plans.yaml') });
const acme = { domain: 'plans', descriptors: [{ entries: [{ key: 'plan', value: 'pro' }, { key: 'customer', value: 'acme' }] }] };

for (const at of ['2026-11-02T09:00:00Z', '2026-11-30T22:59:59Z', '2026-11-30T23:00:00Z']) {
  const hits = at === '2026-11-02T09:00:00Z' ? 100_000 : 1;
  const [status] = (await limiter.check({ ...acme, hits, now: Date.parse(at) })).statuses;
  const reset = new Date(Date.parse(at) + status.durationUntilReset).toISOString();
  console.log(`${at} ${String(hits).padStart(6)} hit(s): ${status.code.padEnd(10)} remaining ${String(status.limitRemaining).padStart(5)}, resets ${reset}`);
}
await limiter.close();
