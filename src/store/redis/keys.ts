/**
 * Redis key names: `<prefix>{<escaped key>}:<algorithm>:<window>`, e.g.
 * `tollgate:{user:42}:tb:1s` (`fwf` for a fixed window that starts at the first hit, `sw10` for a
 * sliding window of precision 10). The caller's key is the hash tag, so every key of one identity
 * lands in one Redis Cluster slot; `%`, `{` and `}` in it are percent-escaped, so a key containing
 * braces cannot move the hash tag and two different keys never share a name.
 */
import calculateSlot from 'cluster-key-slot';
import { algorithmTable } from '../../algorithms/catalog.js';
import type { CompiledPolicy } from '../../policy.js';
import { compactWindow } from '../../units.js';

const ALGORITHM_TAGS = algorithmTable('tag');

const NEEDS_ESCAPE = /[%{}]/;

/** Escapes the characters that would change the key's meaning or hash slot. */
export function escapeKeyPart(key: string): string {
  if (!NEEDS_ESCAPE.test(key)) return key;
  return key.replace(/%/g, '%25').replace(/\{/g, '%7B').replace(/\}/g, '%7D');
}

/**
 * The part after the hash tag, per policy state space: computed once, not per decision. The window
 * is in its largest whole unit (`1h`, `90s`, `1500ms`): one spelling per window, and a shorter key
 * (a key name of 28 bytes or less takes a smaller Redis allocation).
 */
export function keySuffix(policy: CompiledPolicy): string {
  // A first-hit fixed window (`fwf`) keeps its state apart from an aligned one (`fw`), a sliding
  // window of N > 1 buckets (`sw10`) apart from the two-window counter (`sw`).
  const variant = policy.firstHit ? 'f' : policy.precision > 1 ? String(policy.precision) : '';
  return `}:${ALGORITHM_TAGS[policy.algorithm]}${variant}:${compactWindow(policy.windowMs)}`;
}

/** `items` grouped by the Redis Cluster hash slot of their key (a script or multi-key command may not cross slots). */
export function groupBySlot<T>(items: readonly T[], keyOf: (item: T) => string): T[][] {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const slot = calculateSlot(keyOf(item));
    const group = groups.get(slot);
    if (group === undefined) groups.set(slot, [item]);
    else group.push(item);
  }
  return [...groups.values()];
}
