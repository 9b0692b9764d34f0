/**
 * What Redis loses, Tollgate loses (README): a failover to a replica that had not received the
 * latest writes. A real primary and a real replica, the replica fed through a proxy that starts to
 * lag on cue (nothing more reaches it), the primary SIGKILLed, the replica promoted with
 * `REPLICAOF NO ONE`. A key's admissions in the window are then at most the limit plus what the
 * replica missed of it: at most twice the limit per failover.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, redisStore, type Limiter, type Policy, type RedisStore } from '../../../src/index.js';
import { startDelayProxy, type DelayProxy } from '../../support/delay-proxy.js';
import { startRedis, waitFor, type RedisServer } from '../../support/redis.js';

const T0 = 1_700_000_000_000;
const LIMIT = 10;
const POLICIES: readonly Policy[] = [
  { algorithm: 'fixed-window', limit: LIMIT, window: '1h' },
  { algorithm: 'sliding-window', limit: LIMIT, window: '1h' },
  { algorithm: 'token-bucket', limit: LIMIT, window: '1h' },
];

let primary: RedisServer;
let replica: RedisServer;
let link: DelayProxy;
const stores: RedisStore[] = [];

beforeAll(async () => {
  // No wait before a full sync (Redis waits 5 s for more replicas by default).
  primary = await startRedis(['--repl-diskless-sync-delay', '0']);
  link = await startDelayProxy(primary.port, 0);
  replica = await startRedis(['--replicaof', '127.0.0.1', String(link.port)]);
  await waitFor(() => /master_link_status:up/.test(replica.cli('INFO', 'replication')), 'the replica in sync', 20_000);
}, 60_000);

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  await link?.close();
  await Promise.all([primary?.stop(), replica?.stop()]);
});

async function limiterOn(server: RedisServer): Promise<Limiter> {
  const store = redisStore({ url: server.url });
  stores.push(store);
  await store.ready();
  return createLimiter({ store, deadlineMs: 5_000, breaker: false });
}

/** A field of `INFO replication`, as a number. */
const offset = (server: RedisServer, field: string): number => Number(new RegExp(`^${field}:(\\d+)`, 'm').exec(server.cli('INFO', 'replication'))?.[1] ?? NaN);

/** Waits until the replica has processed everything the primary wrote so far. */
async function replicated(): Promise<void> {
  const written = offset(primary, 'master_repl_offset');
  await waitFor(() => offset(replica, 'slave_repl_offset') >= written, `the replica at offset ${written}`, 5_000);
}

/** How many of `attempts` calls on `key` are admitted, all at `now`. */
async function admitted(limiter: Limiter, key: string, policy: Policy, attempts: number): Promise<number> {
  let count = 0;
  for (let i = 0; i < attempts; i++) if ((await limiter.limit(key, policy, { now: T0 })).allowed) count += 1;
  return count;
}

describe('a failover to a lagging replica', () => {
  it('admits at most the limit plus what the replica missed in the window: at most twice the limit', async () => {
    const before = await limiterOn(primary);
    // Seen by the replica: 4 of each "partly" key.
    for (const policy of POLICIES) expect(await admitted(before, `partly:${policy.algorithm}`, policy, 4)).toBe(4);
    await replicated();
    // From now on nothing reaches the replica: the rest of each "partly" key, and every "wholly" key.
    link.lag(3_600_000);
    for (const policy of POLICIES) {
      expect(await admitted(before, `partly:${policy.algorithm}`, policy, 10)).toBe(LIMIT - 4);
      expect(await admitted(before, `wholly:${policy.algorithm}`, policy, 15)).toBe(LIMIT);
    }
    // The primary dies before the replica got them; the replica is promoted.
    process.kill(primary.pid, 'SIGKILL');
    link.cut();
    replica.cli('REPLICAOF', 'NO', 'ONE');
    const after = await limiterOn(replica);
    const totals: Record<string, number[]> = {};
    for (const policy of POLICIES) {
      const partly = LIMIT + (await admitted(after, `partly:${policy.algorithm}`, policy, 15));
      const wholly = LIMIT + (await admitted(after, `wholly:${policy.algorithm}`, policy, 15));
      totals[policy.algorithm] = [partly, wholly];
    }
    console.log(`[failover] limit ${LIMIT}, admitted in the window (replica had 4 / had 0): ${JSON.stringify(totals)}`);
    // The limit, plus what the replica missed (6, then 10): never more than twice the limit.
    expect(totals).toEqual(Object.fromEntries(POLICIES.map((policy) => [policy.algorithm, [LIMIT + 6, 2 * LIMIT]])));
  });
});
