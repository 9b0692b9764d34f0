// At most 2 jobs of a tenant at once, across every process sharing the store (here the memory
// store, on explicit times so the output is always the same; give redisStore(...) for many nodes).
import { createLimiter, memoryStore } from 'tollgate';

const limiter = createLimiter({ store: memoryStore() });
const t0 = Date.UTC(2026, 0, 1);
const slot = { limit: 2, ttl: '30s' };

const a = await limiter.acquire('tenant:acme', { ...slot, now: t0 });
const b = await limiter.acquire('tenant:acme', { ...slot, now: t0 + 1_000 });
const c = await limiter.acquire('tenant:acme', { ...slot, now: t0 + 2_000 });
console.log(`a: allowed ${a.allowed}, held ${a.held}`);
console.log(`b: allowed ${b.allowed}, held ${b.held}`);
console.log(`c: allowed ${c.allowed}, retry in ${c.retryAfter} ms`);

// Released from here, or from any process by key and id: limiter.release('tenant:acme', a.id).
console.log(`release a: ${await a.release({ now: t0 + 3_000 })}`);
console.log(`release a again: ${await a.release({ now: t0 + 3_000 })}`);
const d = await limiter.acquire('tenant:acme', { ...slot, now: t0 + 3_000 });
console.log(`d: allowed ${d.allowed}, held ${d.held}`);
// How many are held, by every process on the store: a look, that takes none.
console.log(`held: ${await limiter.heldSlots(['tenant:acme', 'tenant:other'], { now: t0 + 3_000 })}`);

// b's holder never releases (it crashed): its slot is free 30 s after it was taken.
const e = await limiter.acquire('tenant:acme', { ...slot, now: t0 + 31_000 });
console.log(`e: allowed ${e.allowed}, held ${e.held}`);
await limiter.close();
