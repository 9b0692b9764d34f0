/**
 * A usage ledger as stores keep it (docs/quotas.md §3): per period and key, the units admitted
 * (and refused, when asked), a retry with a request id counted once. The limiter says what to
 * record (limiter/ledger.ts); the memory store keeps it in ledger-memory.ts, Redis in redis/ledger.ts.
 */
/** A value now or later (as types.ts's MaybePromise, which imports this file). */
type MaybePromise<T> = T | Promise<T>;

/** One decision to record. */
export interface LedgerWrite {
  /** The period's name and zone, `2026-11@Europe/Paris`: what an export asks for. */
  readonly period: string;
  readonly key: string;
  /** Admitted units (billed once per `id`) or refused units. */
  readonly admitted: boolean;
  readonly cost: number;
  /** The request id a retry repeats; '' for none. */
  readonly id: string;
  /** Most ids remembered per key and period; the oldest is forgotten past it. */
  readonly ids: number;
  /** The decision's time, and the instant the period is forgotten (epoch ms). */
  readonly now: number;
  readonly expiresAt: number;
}

/**
 * What a write did: `counted`; `repeated` (its id was billed already, nothing counted); `full`
 * (the memory store's cap on keys per period: nothing counted, the store's `dropped` grows).
 */
export type LedgerWriteResult = 'counted' | 'repeated' | 'full';

/** One key's sums in one period. */
export interface LedgerSums {
  readonly key: string;
  readonly admitted: number;
  readonly refused: number;
}

export interface LedgerStore {
  record(write: LedgerWrite): MaybePromise<LedgerWriteResult>;
  /**
   * Every key's sums in `period` (as {@link LedgerWrite.period}), in pages of at most `page`
   * rows, never all at once; a period whose `expiresAt` passed by `now` yields nothing.
   */
  rows(period: string, now: number, page: number): AsyncIterable<readonly LedgerSums[]>;
  /** Writes refused because a period held its most keys (the memory store; 0 elsewhere). */
  dropped(): number;
}
