/**
 * Limits of one group that name the same state (one key under one algorithm and window: one
 * counter) are that counter counted once (docs/semantics.md, "Limits decided together"): each is
 * decided with the largest of their costs, and the state is written at most once. The memory store
 * and the Redis store's path for keys in several Cluster slots use this; the Lua drivers
 * (redis/scripts/shared-keys.lua) do the same by key name.
 */
import type { StoreRequest } from './types.js';

export interface SharedStates {
  /** Per request: the cost to decide it with, the largest of those naming its state. */
  readonly costs: readonly number[];
  /** Per request: the index of the group's first request naming its state. */
  readonly firsts: readonly number[];
}

/** How the group's requests share states; undefined when each names a state of its own (the usual case). */
export function sharedStates(requests: readonly StoreRequest[]): SharedStates | undefined {
  let firsts: number[] | undefined;
  for (let i = 1; i < requests.length; i++) {
    const { key, policy } = requests[i]!;
    for (let j = 0; j < i; j++) {
      const earlier = requests[j]!;
      if (earlier.key === key && earlier.policy.stateId === policy.stateId) {
        firsts ??= requests.map((_, index) => index);
        firsts[i] = firsts[j]!;
        break;
      }
    }
  }
  if (firsts === undefined) return undefined;
  const largest = requests.map((request) => request.cost);
  firsts.forEach((first, i) => (largest[first] = Math.max(largest[first]!, requests[i]!.cost)));
  return { costs: firsts.map((first) => largest[first]!), firsts };
}

/** The usual case, every request its own state: one function for every group, nothing made per call. */
const everyOne = (): boolean => true;

/**
 * Tells, request by request, whether it may write its state: the first of a state that asks does,
 * the others of that state then do not (the state is written once per group).
 */
export function writeOnce(shared: SharedStates | undefined): (index: number) => boolean {
  if (shared === undefined) return everyOne;
  const written = new Set<number>();
  return (index) => {
    const first = shared.firsts[index]!;
    if (written.has(first)) return false;
    written.add(first);
    return true;
  };
}
