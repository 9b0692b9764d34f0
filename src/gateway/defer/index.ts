/** The deferred queue (Redis Streams) and its drain worker: what the gateway calls for `on_limit: defer` routes. */
export { createDeferredQueue, type DeferredQueue, type DeferredQueueHooks, type DeferredQueueOptions } from './queue.js';
export { startDrainWorker, type DrainWorker } from './worker.js';
export type { DrainWorkerHooks, DrainWorkerOptions } from './worker-options.js';
export type { Admission, DeferredEntry, DeferredRequest, DeferredRequestInput, DeliveryResponse, EnqueueResult, HeaderPair, HeadersInput, TicketStatus } from './types.js';
export { IDEMPOTENCY_HEADER, TICKET_HEADER, upstreamDeliverer, type UpstreamDelivererOptions } from './upstream-call.js';
