/**
 * The memory store's usage ledger (ledger.ts): per period a map of key → sums, bounded by a cap on
 * keys per period. At the cap a new key's write is not recorded and counted in `dropped` (the
 * limiter's ledger stats, the service's metric): the sums of keys already held stay exact. A
 * period is forgotten once a write or an export sees its retention end pass.
 */
import type { LedgerStore, LedgerSums, LedgerWrite, LedgerWriteResult } from './ledger.js';

interface Sums {
  admitted: number;
  refused: number;
  /** Request ids billed, oldest first (a Map keeps insertion order). */
  ids: Map<string, true> | undefined;
}

interface Period {
  expiresAt: number;
  readonly keys: Map<string, Sums>;
}

export class MemoryLedger implements LedgerStore {
  private readonly periods = new Map<string, Period>();
  private droppedWrites = 0;

  constructor(private readonly maxKeysPerPeriod: number) {}

  record(write: LedgerWrite): LedgerWriteResult {
    this.forgetExpired(write.now);
    let period = this.periods.get(write.period);
    if (period === undefined) {
      period = { expiresAt: write.expiresAt, keys: new Map() };
      this.periods.set(write.period, period);
    } else if (write.expiresAt > period.expiresAt) period.expiresAt = write.expiresAt;
    let sums = period.keys.get(write.key);
    if (sums === undefined) {
      if (period.keys.size >= this.maxKeysPerPeriod) {
        this.droppedWrites++;
        return 'full';
      }
      sums = { admitted: 0, refused: 0, ids: undefined };
      period.keys.set(write.key, sums);
    }
    if (!write.admitted) {
      sums.refused += write.cost;
      return 'counted';
    }
    if (write.id !== '') {
      sums.ids ??= new Map();
      if (sums.ids.has(write.id)) return 'repeated';
      sums.ids.set(write.id, true);
      // Past the bound the oldest id is forgotten: a retry that late counts again.
      if (sums.ids.size > write.ids) sums.ids.delete(sums.ids.keys().next().value!);
    }
    sums.admitted += write.cost;
    return 'counted';
  }

  async *rows(period: string, now: number, page: number): AsyncIterable<readonly LedgerSums[]> {
    this.forgetExpired(now);
    const held = this.periods.get(period);
    if (held === undefined) return;
    let rows: LedgerSums[] = [];
    for (const [key, sums] of held.keys) {
      rows.push({ key, admitted: sums.admitted, refused: sums.refused });
      if (rows.length === page) {
        yield rows;
        rows = [];
      }
    }
    if (rows.length > 0) yield rows;
  }

  dropped(): number {
    return this.droppedWrites;
  }

  private forgetExpired(now: number): void {
    for (const [name, period] of this.periods) if (period.expiresAt <= now) this.periods.delete(name);
  }
}
