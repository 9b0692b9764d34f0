/**
 * Redis key names. The caller's key is the hash tag, so every key of one identity lands in one
 * Redis Cluster slot; `%`, `{` and `}` in it are percent-escaped, so a key containing braces cannot
 * move the hash tag and two different keys never share a name. Two layouts (docs/redis.md):
 * - layout 2, the algorithms stored as one integer (scripts/layout.lua): `<prefix>{<key>}<tag><window>`,
 *   e.g. `tollgate:{user:42}g1s`, tags `f` (fixed-window; `fh` starting at the first hit), `t`
 *   (token-bucket), `l` (leaky-bucket), `g` (gcra); a calendar window is `fc<unit>@<zone>`
 *   (`tollgate:{user:42}fcmonth@Europe/Paris`);
 * - layout 1, the others: `<prefix>{<key>}:<algorithm>:<window>`, e.g. `tollgate:{user:42}:sw:1m`
 *   (`sw10` for a sliding window of precision 10), and the multi-region store's hashes.
 * A layout-2 name never has `:` right after the hash tag, so it never names a layout-1 key: a node
 * of an older version, which wrote fixed-window state under `}:fw:`, never reads the new values.
 */
import calculateSlot from 'cluster-key-slot';
import { algorithmTable } from '../../algorithms/catalog.js';
import { cachedPerState, type CompiledPolicy } from '../../policy.js';
import { compactWindow } from '../../units.js';

const ALGORITHM_TAGS = algorithmTable('tag');

const NEEDS_ESCAPE = /[%{}]/;

/** Escapes the characters that would change the key's meaning or hash slot. */
export function escapeKeyPart(key: string): string {
  if (!NEEDS_ESCAPE.test(key)) return key;
  return key.replace(/%/g, '%25').replace(/\{/g, '%7B').replace(/\}/g, '%7D');
}

/** The layout-2 tag of each algorithm stored as one integer and its end (scripts/layout.lua). */
const LAYOUT_2_TAGS: Partial<Record<CompiledPolicy['algorithm'], string>> = {
  'fixed-window': 'f',
  'token-bucket': 't',
  'leaky-bucket': 'l',
  gcra: 'g',
};

/**
 * The part after the hash tag, per policy state (computed once per state: {@link stateKeySuffix}). The window
 * is in its largest whole unit (`1h`, `90s`, `1500ms`): one spelling per window, and a shorter key
 * (a key name of 28 bytes or less takes a smaller Redis allocation, one of 12 or less a smaller still).
 */
export function keySuffix(policy: CompiledPolicy): string {
  const tag = LAYOUT_2_TAGS[policy.algorithm];
  if (tag === undefined) return layoutOneSuffix(policy);
  // A calendar window: `fc`, its unit and zone (`}fcmonth@Europe/Paris`); zone names hold no brace.
  if (policy.calendar !== undefined) return `}${tag}c${policy.calendar.unit}@${policy.calendar.timeZone}`;
  return `}${tag}${policy.firstHit ? 'h' : ''}${compactWindow(policy.windowMs)}`;
}

/** The layout-1 suffix `}:<algorithm>:<window>` (sliding windows, sliding logs, the multi-region store's hashes). */
export function layoutOneSuffix(policy: CompiledPolicy): string {
  // A first-hit fixed window (`fwf`) keeps its state apart from an aligned one (`fw`), a sliding
  // window of N > 1 buckets (`sw10`) apart from the two-window counter (`sw`).
  const variant = policy.firstHit ? 'f' : policy.precision > 1 ? String(policy.precision) : '';
  return `}:${ALGORITHM_TAGS[policy.algorithm]}${variant}:${compactWindow(policy.windowMs)}`;
}

/** {@link keySuffix} and {@link layoutOneSuffix}, computed once per state rather than per decision. */
export const stateKeySuffix = cachedPerState(keySuffix);
export const stateLayoutOneSuffix = cachedPerState(layoutOneSuffix);

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
