/**
 * The usage ledger on Redis (../ledger.ts). A period's keys are spread over {@link SHARDS} shards
 * by a hash of the key; a shard is one Cluster slot (its hash tag `{%L<period>|<shard>}`, which no
 * caller's key can name: theirs are escaped, so `%` is always `%25`) holding a hash of admitted
 * units, a hash of refused units, a sorted set of its keys (score 0, read in key order) and one
 * sorted set of request ids per key. One script call (scripts/ledger.lua) writes a decision's
 * sums and its id atomically; an export reads each shard's keys in pages by key (ZRANGE BYLEX),
 * exact and without repeats, whatever is written meanwhile, never the whole period at once.
 */
import type { Cluster, Redis } from 'ioredis';
import type { LedgerStore, LedgerSums, LedgerWrite, LedgerWriteResult } from '../ledger.js';
import { escapeKeyPart } from './keys.js';
import { LEDGER_SCRIPT, type RedisScript } from './lua.js';

/** Shards per period: the Cluster slots a period's writes and its export are spread over. */
export const SHARDS = 32;

type Run = (script: RedisScript, keys: string[], args: (string | number)[]) => Promise<unknown>;

/** FNV-1a of the key, to pick its shard. */
export function shardOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % SHARDS;
}

export class RedisLedger implements LedgerStore {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly prefix: string,
    private readonly run: Run,
  ) {}

  private shard(period: string, shard: number): string {
    return `${this.prefix}{%L${period}|${shard}}`;
  }

  async record(write: LedgerWrite): Promise<LedgerWriteResult> {
    const base = this.shard(write.period, shardOf(write.key));
    const keys = [`${base}c`, `${base}r`, `${base}k`, `${base}i${escapeKeyPart(write.key)}`];
    const answer = await this.run(LEDGER_SCRIPT, keys, [write.key, write.admitted ? 1 : 0, write.cost, write.id, write.ids, write.now, write.expiresAt]);
    return Number(answer) === 2 ? 'repeated' : 'counted';
  }

  async *rows(period: string, now: number, page: number): AsyncIterable<readonly LedgerSums[]> {
    for (let shard = 0; shard < SHARDS; shard++) {
      const base = this.shard(period, shard);
      const kept = await this.client.hget(`${base}c`, '');
      if (kept === null || Number(kept) <= now) continue;
      let after = '-';
      for (;;) {
        const keys = await this.client.zrangebylex(`${base}k`, after, '+', 'LIMIT', 0, page);
        if (keys.length === 0) break;
        const [admitted, refused] = await Promise.all([this.client.hmget(`${base}c`, ...keys), this.client.hmget(`${base}r`, ...keys)]);
        yield keys.map((key, i) => ({ key, admitted: Number(admitted[i] ?? 0), refused: Number(refused[i] ?? 0) }));
        if (keys.length < page) break;
        after = `(${keys[keys.length - 1]!}`;
      }
    }
  }

  dropped(): number {
    return 0;
  }
}
