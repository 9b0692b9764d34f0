/**
 * The algorithms, once: every list of algorithm names, Redis key tags and Lua wire codes is
 * derived from this table. Pure data, importing nothing, so the lowest modules (policy.ts) can
 * use it; the implementations are in registry.ts and the other files of this folder.
 */

/** What the rest of Tollgate needs to know about an algorithm. */
export interface AlgorithmEntry {
  /** The public name, as policies and rule files write it. */
  readonly name: string;
  /** In Redis key names: `tollgate:{user:42}:<tag>:1s`. Never changed once released (keys would move). */
  readonly tag: string;
  /** The algorithm's number in the Redis script's arguments (decide.lua names the same numbers). */
  readonly code: number;
  /** Whether its capacity is `burst` and it refills continuously (window algorithms ignore `burst`). */
  readonly usesBurst: boolean;
  /**
   * Whether its arithmetic multiplies counts by the window (bucket levels in units of window/limit,
   * the sliding window's weighted count), which bounds (capacity + 1) × window by 2^53. Fixed window
   * and sliding log only add counts: any limit and window a policy can hold count exactly.
   */
  readonly multipliesByWindow: boolean;
}

export const ALGORITHM_CATALOG = [
  { name: 'token-bucket', tag: 'tb', code: 1, usesBurst: true, multipliesByWindow: true },
  { name: 'leaky-bucket', tag: 'lb', code: 2, usesBurst: true, multipliesByWindow: true },
  { name: 'fixed-window', tag: 'fw', code: 3, usesBurst: false, multipliesByWindow: false },
  { name: 'sliding-log', tag: 'sl', code: 4, usesBurst: false, multipliesByWindow: false },
  { name: 'sliding-window', tag: 'sw', code: 5, usesBurst: false, multipliesByWindow: true },
  { name: 'gcra', tag: 'gcra', code: 6, usesBurst: true, multipliesByWindow: true },
] as const satisfies readonly AlgorithmEntry[];

type Names<T extends readonly AlgorithmEntry[]> = { readonly [I in keyof T]: T[I]['name'] };

/** The six algorithms, by their public names. */
export const ALGORITHMS = ALGORITHM_CATALOG.map((entry) => entry.name) as unknown as Names<typeof ALGORITHM_CATALOG>;

/** One of the six algorithm names. */
export type AlgorithmName = (typeof ALGORITHMS)[number];

/** One field of every algorithm's entry, by name: `algorithmTable('tag')['token-bucket']` is `'tb'`. */
export function algorithmTable<F extends keyof AlgorithmEntry>(field: F): Readonly<Record<AlgorithmName, AlgorithmEntry[F]>> {
  return Object.freeze(Object.fromEntries(ALGORITHM_CATALOG.map((entry) => [entry.name, entry[field]])) as Record<AlgorithmName, AlgorithmEntry[F]>);
}
