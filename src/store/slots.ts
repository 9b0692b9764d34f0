/**
 * Concurrency slots as a store holds them: per caller's key, a set of holders (permit id → when
 * its slot expires). A slot is held from its acquire until its release or its expiry, whichever is
 * first; expired holders are removed before anything is counted, so a holder that died frees its
 * slot after its ttl without anyone's help. The limiter (limiter/concurrency.ts) checks every
 * argument before a store sees it.
 */

/** One acquire, checked: `limit` ≥ 1 holders at once, each for `ttlMs` ≥ 1 unless released first. */
export interface SlotRequest {
  readonly id: string;
  readonly limit: number;
  readonly ttlMs: number;
}

/** A store's answer to an acquire. */
export interface SlotAnswer {
  readonly allowed: boolean;
  /** Slots held after this call (this one included when it was granted). */
  readonly held: number;
  /** When refused: ms until the earliest held slot expires (a release may free one sooner); 0 when granted. */
  readonly retryAfter: number;
  /** When granted: when this slot expires unless released (epoch ms); 0 when refused. */
  readonly expiresAt: number;
  /** The store's time of the decision (epoch ms). */
  readonly now: number;
}

/** A store's answer to a release. */
export interface SlotRelease {
  /** Whether a slot held by that id was freed (false: released already, expired, or never held). */
  readonly released: boolean;
  /** Slots held after this call. */
  readonly held: number;
}
