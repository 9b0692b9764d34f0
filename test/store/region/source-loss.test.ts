/**
 * The replicator of a region whose own Redis loses its data: FLUSHALL, and a restart of the
 * redis-server without persistence. The region's change sequence starts again from 1; a replicator
 * that kept its cursors in memory read nothing after them and dropped every new change while its
 * stats said `pending 0`. Now it sees the new epoch (the id it wrote in that Redis is gone), reads
 * the cursors again (none: from the start), sends every change made since, and says so in its stats
 * and through `onSourceReset`. Real redis-servers, real replicator, decisions through createLimiter.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, regionStore, startReplicator, type Limiter, type Policy, type Replicator, type SourceReset } from '../../../src/index.js';
import { startReplicateCommand } from '../../../src/cli/replicate.js';
import { useRegionPair } from '../../support/regions.js';

const regions = useRegionPair(0);
const big: Policy = { algorithm: 'fixed-window', limit: 100_000, window: '1h' };
const now = 1_800_000_000_000;
const unique = (name: string): string => `${name}-${Math.random().toString(36).slice(2)}`;

async function node(region: 'eu' | 'us'): Promise<Limiter> {
  const store = regionStore({ region, url: regions[region].url });
  await store.ready();
  return regions.track(createLimiter({ store, deadlineMs: 5_000 }));
}

async function used(limiter: Limiter, key: string): Promise<number> {
  const decision = await limiter.look(key, big, { now });
  return decision.limit - decision.remaining;
}

async function eventually(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** eu's replicator to us, its resets collected. */
async function replicating(): Promise<{ replicator: Replicator; resets: SourceReset[] }> {
  const resets: SourceReset[] = [];
  const replicator = regions.track(startReplicator({ region: 'eu', from: { url: regions.eu.url }, to: [{ region: 'us', url: regions.us.url }], intervalMs: 20, onSourceReset: (reset) => resets.push(reset) }));
  await replicator.ready();
  return { replicator, resets };
}

/** Changes `count` keys in eu (cost 2 each) and waits until us has them all. */
async function replicatedChanges(eu: Limiter, us: Limiter, count: number): Promise<string[]> {
  const keys = Array.from({ length: count }, () => unique('before'));
  for (const key of keys) await eu.limit(key, big, { now, cost: 2 });
  await eventually(async () => (await Promise.all(keys.map((key) => used(us, key)))).every((count) => count === 2), 'us to see eu\'s changes');
  return keys;
}

/** Waits until eu's Redis holds us's cursor at eu's latest change (the replicator acknowledged it there). */
async function cursorWritten(): Promise<void> {
  await eventually(async () => {
    const sequence = regions.eu.cli('GET', 'tollgate:region-sequence:eu').trim();
    return sequence !== '' && regions.eu.cli('HGET', 'tollgate:region-cursors:eu', 'us').trim() === sequence;
  }, 'eu to hold the cursor of every change us has');
}

interface Loss {
  readonly name: string;
  /** Loses eu's data, after `saved` (eu's changes so far) were replicated. */
  lose(eu: Limiter, us: Limiter): Promise<void>;
  readonly reason: SourceReset['reason'];
  /** What us sees of the first key changed before the loss (cost 2) once eu adds 1 to it after. */
  readonly firstKeyAtPeer: number;
}

const LOSSES: readonly Loss[] = [
  // The peer keeps the larger of eu's count before (2) and after (1) the loss.
  { name: 'FLUSHALL', lose: async () => void regions.eu.cli('FLUSHALL'), reason: 'epoch', firstKeyAtPeer: 2 },
  { name: 'a restart without persistence', lose: () => regions.eu.restart(), reason: 'epoch', firstKeyAtPeer: 2 },
  {
    // What a replica that lagged holds when it takes over: the same data (and epoch), fewer changes.
    name: 'a restart from an older snapshot',
    lose: async (eu, us) => {
      await cursorWritten();
      regions.eu.cli('SAVE');
      await replicatedChanges(eu, us, 3);
      // The cursor past the snapshot is written: the restart shows an older cursor, however fast
      // the first writes after it carry the sequence past what was sent.
      await cursorWritten();
      await regions.eu.restart();
    },
    reason: 'sequence',
    firstKeyAtPeer: 3,
  },
];

describe('the replicator of a region whose Redis lost its data', () => {
  it.each(LOSSES)('after $name, sends the changes made since, and reports the loss in its stats', async (loss) => {
    const [eu, us] = [await node('eu'), await node('us')];
    const { replicator, resets } = await replicating();
    const before = await replicatedChanges(eu, us, 5);
    const epoch = replicator.stats().epoch;
    expect(epoch).toMatch(/^[0-9a-f-]{36}$/);

    await loss.lose(eu, us);
    // The first changes after the loss: new keys, and a key eu counted before.
    await eventually(async () => (await eu.look(before[0]!, big, { now })).reason === undefined, 'eu to answer from its Redis again');
    const after = [unique('after'), unique('after'), unique('after')];
    for (const key of after) await eu.limit(key, big, { now, cost: 3 });
    await eu.limit(before[0]!, big, { now, cost: 1 });

    await eventually(async () => (await Promise.all(after.map((key) => used(us, key)))).every((count) => count === 3), 'us to see the changes made after the loss', 3_000);
    expect(await used(us, before[0]!)).toBe(loss.firstKeyAtPeer);
    const stats = replicator.stats();
    expect(stats.sourceResets).toBe(1);
    expect(resets).toEqual([{ reason: loss.reason, at: expect.any(Number), previousEpoch: epoch, epoch: stats.epoch }]);
    if (loss.reason === 'epoch') expect(stats.epoch).not.toBe(epoch);
    else expect(stats.epoch).toBe(epoch);
    await eventually(async () => replicator.stats().peers[0]!.behind === 0, 'us to have acknowledged every change');
    expect(replicator.stats().peers[0]).toMatchObject({ pending: 0, behind: 0, lastError: undefined });
    console.log(`[multi-region] source lost its data (${loss.name}): reset seen (${loss.reason}), the ${after.length + 1} changes made since reached the peer`);
    await replicator.close();
  }, 20_000);

  it('tollgate replicate says so in a line', async () => {
    const lines: string[] = [];
    const replicator = regions.track(startReplicateCommand({ region: 'eu', redis: regions.eu.url, peer: [`us=${regions.us.url}`], 'interval-ms': '20', 'key-prefix': 'cli-loss:' }, (line) => lines.push(line)));
    await replicator.ready();
    await eventually(async () => replicator.stats().epoch !== undefined, 'the replicator to read its epoch');
    regions.eu.cli('FLUSHALL');
    await eventually(async () => lines.length > 0, 'a line about the loss');
    expect(lines).toEqual([expect.stringMatching(/^tollgate replicate: the Redis of region eu lost its data \(restarted without persistence, or flushed\); sending its changes again from the cursors it holds \(epoch [0-9a-f-]{36} -> [0-9a-f-]{36}\)$/)]);
    await replicator.close();
  });
});
