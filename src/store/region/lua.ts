/**
 * The Lua of the multi-region store: the decision script (composed with the single-Redis store's
 * prelude and window algorithms, so a region alone decides exactly as that store does) and the
 * replicator's scripts. Each is read and hashed once, at load time.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

/** A script's source and the SHA1 EVALSHA names it by. */
export interface Script {
  readonly source: string;
  readonly sha1: string;
}

function read(path: string): string {
  return readFileSync(new URL(path, import.meta.url), 'utf8');
}

function script(paths: readonly string[]): Script {
  const source = paths.map((path) => `-- ==== ${path.split('/').pop()} ====\n${read(path)}`).join('\n');
  return { source, sha1: createHash('sha1').update(source).digest('hex') };
}

/** Decides a group of requests in one region (prelude and algorithms from the single-Redis store). */
export const REGION_DECIDE_SCRIPT: Script = script([
  '../redis/scripts/prelude.lua',
  '../redis/scripts/fixed-window.lua',
  '../redis/scripts/sliding-window.lua',
  '../redis/scripts/shared-keys.lua',
  './scripts/decide.lua',
]);

/** Reads the changes a peer has not been sent (replicator, on the region's own Redis). */
export const REGION_PULL_SCRIPT: Script = script(['./scripts/pull.lua']);

/** Max-merges a peer's fields (replicator, on the peer's Redis). */
export const REGION_MERGE_SCRIPT: Script = script(['./scripts/merge.lua']);

/** Records a peer's cursor and trims the change log (replicator, on the region's own Redis). */
export const REGION_ACK_SCRIPT: Script = script(['./scripts/ack.lua']);
