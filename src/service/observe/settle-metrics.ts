/**
 * Settles in Prometheus metrics, from the service's `settle` events (check/reserve.ts): what each
 * `POST /v1/settle` did on each limit it found, by domain and rule path (the key form: `(v1/limit)`
 * for both, as its reserves are counted), and status. The reserves themselves are counted as
 * decisions (`tollgate_decisions_total`): a settle decides nothing, so it has a counter of its own.
 */
import { Counter, type Registry } from 'prom-client';
import type { ServiceContext, SettleEvent } from '../context.js';

/** Registers the settle counter and counts `settle` events; returns the unsubscribe. */
export function defineSettleMetrics(ctx: ServiceContext, registers: Registry[]): () => void {
  const settles = new Counter({
    name: 'tollgate_settles_total',
    help: 'Settled limits (POST /v1/settle, one per limit the settle found) by domain, rule path ("(v1/limit)" for the key form) and status: settled (the difference applied), repeated (settled already), unknown (no open reservation of the id).',
    labelNames: ['domain', 'rule', 'status'] as const,
    registers,
  });
  const onSettle = (event: SettleEvent): void => {
    for (const { rule, status } of event.limits) settles.inc({ domain: event.domain, rule, status });
  };
  ctx.events.on('settle', onSettle);
  return () => ctx.events.off('settle', onSettle);
}
