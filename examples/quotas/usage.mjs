// What a customer used of its month, spending nothing: limiter.usage(key, policy) at explicit times.
import { createLimiter, memoryStore } from 'tollgate';

const limiter = createLimiter({ store: memoryStore() });
const month = { algorithm: 'fixed-window', limit: 100_000, window: 'month', timeZone: 'Europe/Paris' };

await limiter.limit('customer:acme', month, { cost: 1_250, now: Date.parse('2026-11-02T09:00:00Z') });
for (const at of ['2026-11-29T12:00:00Z', '2026-11-30T23:00:00Z']) {
  const { used, limit, periodStart, periodEnd } = await limiter.usage('customer:acme', month, { now: Date.parse(at) });
  console.log(`${at}: used ${used}/${limit} in [${new Date(periodStart).toISOString()}, ${new Date(periodEnd).toISOString()})`);
}
await limiter.close();
