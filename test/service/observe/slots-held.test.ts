/**
 * `tollgate_slots_held` as an operator reads it: the slots held now, counted by the store at scrape
 * time, over the keys this process answered an acquire of most recently (at most 1,000). Two
 * services share one Redis (started for this file, so it may be stopped): another node's acquires
 * and releases count without any call on this node, a slot past its ttl stops counting without any
 * call on its key, a key this node never answered is not counted; when the store cannot answer, the
 * gauge shows the counts last known. On the memory store, past 1,000 keys the oldest leaves.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { sampleSum, scrapeMetrics } from '../../support/observability.js';
import { startRedis, type RedisServer } from '../../support/redis.js';

async function start(extra: Record<string, string>): Promise<RunningService> {
  return startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', 'log-level': 'silent', ...extra }, {}));
}

async function post(service: RunningService, path: string, body: unknown): Promise<Record<string, unknown>> {
  const response = await fetch(`http://127.0.0.1:${service.httpPort!}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return (await response.json()) as Record<string, unknown>;
}

async function slotsHeld(service: RunningService): Promise<number> {
  return sampleSum((await scrapeMetrics(service)).samples, 'tollgate_slots_held');
}

describe('tollgate_slots_held on two nodes sharing Redis', () => {
  let redis: RedisServer;
  let a: RunningService;
  let b: RunningService;

  beforeAll(async () => {
    redis = await startRedis();
    a = await start({ redis: redis.url });
    b = await start({ redis: redis.url });
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    await redis?.stop();
  });

  it("counts the store's slots at scrape time: another node's acquires and releases, not an expired slot, not a key this node never answered; the last known when the store cannot answer", async () => {
    const acquire = (node: RunningService, key: string, ttl = '1h') => post(node, '/v1/acquire', { key, limit: 10, ttl });
    expect(await slotsHeld(a)).toBe(0);
    await acquire(a, 'shared');
    expect(await slotsHeld(a)).toBe(1);
    // Two slots taken on the other node: counted here with no call on this node.
    await acquire(b, 'shared');
    const theirs = await acquire(b, 'shared');
    expect(await slotsHeld(a)).toBe(3);
    await post(b, '/v1/release', { key: 'shared', id: theirs.id });
    expect(await slotsHeld(a)).toBe(2);
    // A slot whose holder never releases it stops counting at its ttl, with nobody calling on its key.
    const short = await acquire(a, 'short-lived', '400ms');
    expect(await slotsHeld(a)).toBe(3);
    const expiresAt = short.expiresAt as number;
    while (Date.now() <= expiresAt + 50) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await slotsHeld(a)).toBe(2);
    // The bound: keys this node never answered an acquire of are not counted here.
    await acquire(b, 'only-on-b');
    expect([await slotsHeld(a), await slotsHeld(b)]).toEqual([2, 3]);
    // The store gone: the counts last known, not 0 and not an error.
    await redis.stop();
    expect(await slotsHeld(a)).toBe(2);
  });
});

describe('tollgate_slots_held on the memory store', () => {
  let service: RunningService;

  beforeAll(async () => {
    service = await start({});
  });

  afterAll(async () => {
    await service?.close();
  });

  it('counts the 1,000 keys this process answered an acquire of most recently', async () => {
    // tenant-0 first, then the others, 100 at a time.
    await post(service, '/v1/acquire', { key: 'tenant-0', limit: 1, ttl: '1h' });
    for (let i = 1; i <= 1_000; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => post(service, '/v1/acquire', { key: `tenant-${i + j}`, limit: 1, ttl: '1h' })));
    }
    // 1,001 keys of one slot each: the oldest is no longer counted.
    expect(await slotsHeld(service)).toBe(1_000);
    // Answered again, it is the newest: counted, and the next oldest leaves.
    await post(service, '/v1/acquire', { key: 'tenant-0', limit: 1, ttl: '1h' });
    expect(await slotsHeld(service)).toBe(1_000);
  });
});
