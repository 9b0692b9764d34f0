/**
 * The usage ledger in Prometheus metrics (limiter/ledger.ts): its writes by result, read from the
 * limiter's counters at scrape time — `counted`, `repeated` (a request id billed already),
 * `failed` (the store failed the write after the decision: that usage is missing), `unrecorded`
 * (a failure mode answered, not the store), `dropped` (the memory store's cap on keys per period).
 */
import { Counter, type Registry } from 'prom-client';
import type { LedgerStats } from '../../limiter/index.js';
import type { ServiceContext } from '../context.js';

const RESULTS = ['counted', 'repeated', 'failed', 'unrecorded', 'dropped'] as const satisfies readonly (keyof LedgerStats)[];

export function defineLedgerMetrics(ctx: ServiceContext, registers: Registry[]): void {
  const seen: Record<keyof LedgerStats, number> = { counted: 0, repeated: 0, failed: 0, unrecorded: 0, dropped: 0 };
  new Counter({
    name: 'tollgate_ledger_writes_total',
    help: 'Usage ledger writes, by result: counted; repeated (its request id was billed already); failed (the store failed it after the decision: that usage is missing from the ledger); unrecorded (a failure mode answered, not the store); dropped (the memory store held maxLedgerKeys keys in that period).',
    labelNames: ['result'] as const,
    registers,
    collect() {
      const stats = ctx.limiter.ledger.stats();
      for (const result of RESULTS) {
        if (stats[result] > seen[result]) this.inc({ result }, stats[result] - seen[result]);
        seen[result] = Math.max(seen[result], stats[result]);
      }
    },
  });
}
