/**
 * Deleting keys by pattern, for the Redis store's `resetPrefix`: SCAN with MATCH (never KEYS, which
 * blocks Redis for the whole keyspace), then UNLINK (freed off the main thread) page by page; on a
 * Cluster, on every master, one UNLINK per hash slot (a multi-key command may not cross slots).
 */
import { Cluster, type Redis } from 'ioredis';
import { groupBySlot } from './keys.js';

/** Keys asked for per SCAN call (a hint to Redis, which may answer more or fewer). */
const SCAN_COUNT = 1000;

/** `text` with the glob characters of SCAN MATCH (`* ? [ ] \`) escaped, so it matches only itself. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Unlinks every key matching `pattern` (on a Cluster: on every master); resolves to how many were removed. */
export async function unlinkMatching(client: Redis | Cluster, pattern: string): Promise<number> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const removed = await Promise.all(nodes.map((node) => unlinkOnNode(node, pattern, client instanceof Cluster)));
  return removed.reduce((sum, count) => sum + count, 0);
}

async function unlinkOnNode(node: Redis, pattern: string, bySlot: boolean): Promise<number> {
  let removed = 0;
  let cursor = '0';
  do {
    const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
    cursor = next;
    if (keys.length === 0) continue;
    const groups = bySlot ? groupBySlot(keys, (key) => key) : [keys];
    const counts = await Promise.all(groups.map((group) => node.unlink(...group)));
    for (const count of counts) removed += count;
  } while (cursor !== '0');
  return removed;
}
