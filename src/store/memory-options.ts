/** The memory store's options and the counters it reports (memory.ts). */
import type { WholeNumberRange } from '../options.js';

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions {
  /** Most keys held at once (across all policies); when full, the state that carries least is evicted. Default 1,000,000. */
  readonly maxKeys?: number;
  /** How often (ms) a background sweep reclaims expired keys; 0 disables it. Default 60,000. */
  readonly sweepIntervalMs?: number;
  /** Most keys a usage ledger holds per period (ledger-memory.ts); past it, writes of new keys are dropped and counted. Default 100,000. */
  readonly maxLedgerKeys?: number;
}

/** Counters describing the store, for metrics. */
export interface MemoryStoreStats {
  /** Keys currently held. */
  readonly keys: number;
  readonly maxKeys: number;
  /**
   * States (algorithm and window pairs) the store holds keys of: never more than `keys`, since a
   * state's number is freed with its last key (store/state-spaces.ts).
   */
  readonly spaces: number;
  /** Keys dropped to make room (the state that carries least first). */
  readonly evictions: number;
  /** Keys reclaimed because their state had expired. */
  readonly expired: number;
}

/** The store's whole-number options (`tollgate serve --max-keys` too): their ranges and defaults. */
export const MEMORY_STORE_NUMBERS = {
  maxKeys: { min: 1, max: 2 ** 30, fallback: 1_000_000 },
  sweepIntervalMs: { min: 0, unit: 'ms', meaning: '0 disables', fallback: 60_000 },
  maxLedgerKeys: { min: 1, max: 2 ** 30, fallback: 100_000 },
} as const satisfies Record<string, WholeNumberRange>;
