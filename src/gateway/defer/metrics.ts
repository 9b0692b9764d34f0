/**
 * The deferred queue's metrics on the service's registry (GET /metrics on the admin port), fed by
 * the queue's and the drain workers' hooks. Labelled by queue name: names come from the
 * configuration, never from a request, so the series are bounded.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { DeferredQueueHooks, DrainWorkerHooks } from './index.js';

/** The hooks the queues and workers call. */
export interface DeferMetricHooks {
  readonly queue: Partial<DeferredQueueHooks>;
  readonly worker: Omit<Partial<DrainWorkerHooks>, 'error'>;
}

/** Registers the deferred-processing families on `registry` and answers the hooks that count in them. */
export function deferMetrics(registry: Registry): DeferMetricHooks {
  const registers = [registry];
  const counter = (name: string, help: string) => new Counter({ name, help, labelNames: ['queue'], registers });
  const enqueued = counter('tollgate_deferred_enqueued_total', 'Throttled requests stored in a deferred queue (answered 202)');
  const refused = counter('tollgate_deferred_refused_total', 'Throttled requests refused because their deferred queue was full (answered 429)');
  const delivered = counter('tollgate_deferred_delivered_total', 'Deferred requests delivered upstream (a non-5xx answer recorded)');
  const retried = counter('tollgate_deferred_retried_total', 'Delivery attempts that failed (5xx or network error) and will be retried');
  const failed = counter('tollgate_deferred_failed_total', 'Deferred requests marked failed after their last attempt');
  const lost = counter('tollgate_deferred_lost_total', 'Entries a drain worker gave up to another worker that had taken them over (it was silent past reclaim_after)');
  const length = new Gauge({ name: 'tollgate_deferred_queue_length', help: 'Requests in a deferred queue (waiting or being delivered), as last seen', labelNames: ['queue'], registers });
  return {
    queue: {
      enqueued: (queue) => enqueued.inc({ queue }),
      refused: (queue) => refused.inc({ queue }),
      queueLength: (queue, value) => length.set({ queue }, value),
    },
    worker: {
      delivered: (queue) => delivered.inc({ queue }),
      retried: (queue) => retried.inc({ queue }),
      failed: (queue) => failed.inc({ queue }),
      lost: (queue) => lost.inc({ queue }),
    },
  };
}
