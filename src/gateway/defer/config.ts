/**
 * A defer route's `defer:` block (its queue's name and bounds), and the checks that span routes:
 * two defer routes never share a queue, and no route hides behind the ticket status path.
 */
import type { YAMLMap } from 'yaml';
import { readText, readWholeNumber, type DocumentReader, type Entry, type FieldSet } from '../../rules/parse/fields.js';
import type { DeferSettings, RouteConfig } from '../config/types.js';
import { readDuration, readSize } from '../config/values.js';

/** Where clients read their tickets on the proxy port (reserved only when some route defers). */
export const DEFERRED_STATUS_PREFIX = '/_tollgate/deferred/';

const DEFER_FIELDS: FieldSet = { what: 'defer', names: ['queue', 'max_length', 'max_body', 'max_attempts', 'result_ttl', 'reclaim_after'], misplaced: {} };
const QUEUE_NAME = /^[A-Za-z0-9_:-]{1,128}$/;
export const DEFER_DEFAULTS = { maxLength: 1_000, maxBodyBytes: 1_048_576, maxAttempts: 5, resultTtlMs: 86_400_000, reclaimAfterMs: 30_000 } as const;
/** The largest `max_body`: the queue keeps whole bodies in Redis. */
export const MAX_DEFER_BODY = 64 * 1_048_576;

const DAY = 86_400_000;

/** A duration in `[min, max]` ms. */
function readBoundedDuration(reader: DocumentReader, entry: Entry | undefined, min: number, max: number): number | undefined {
  const ms = readDuration(reader, entry);
  if (ms === undefined || (ms >= min && ms <= max)) return ms;
  reader.report(entry!.value, entry!.path, `${entry!.name} must be from ${min} ms to ${max / DAY} days, got ${ms} ms`);
  return undefined;
}

/** The default queue name: the domain (characters a queue name cannot hold become `_`), `:`, the route's index. */
function defaultQueueName(domain: string | undefined, routeIndex: number): string {
  return `${(domain ?? 'route').replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 100)}:${routeIndex}`;
}

/** Reads `defer:` (absent: every default). `routePath` is `routes[N]`: N makes the default queue name. */
export function readDeferBlock(reader: DocumentReader, entry: Entry | undefined, routePath: string, domain: string | undefined): DeferSettings | undefined {
  const routeIndex = Number(/\[(\d+)\]$/.exec(routePath)?.[1] ?? 0);
  const defaults = { queue: defaultQueueName(domain, routeIndex), ...DEFER_DEFAULTS };
  if (entry?.value === undefined) return defaults;
  const map = reader.mapping(entry.value, entry.path, 'a mapping like { max_length: 1000, max_body: 1MiB }');
  if (map === undefined) return undefined;
  const fields = reader.entries(map, entry.path, DEFER_FIELDS);
  const queueEntry = fields.get('queue');
  let queue = readText(reader, queueEntry);
  if (queue !== undefined && !QUEUE_NAME.test(queue)) {
    reader.report(queueEntry!.value, queueEntry!.path, `queue must be 1-128 letters, digits, "_", "-" or ":" (no "."), got ${JSON.stringify(queue)}`);
    queue = undefined;
  }
  return {
    queue: queue ?? defaults.queue,
    maxLength: readWholeNumber(reader, fields.get('max_length'), 1, 10_000_000) ?? defaults.maxLength,
    maxBodyBytes: readSize(reader, fields.get('max_body'), MAX_DEFER_BODY) ?? defaults.maxBodyBytes,
    maxAttempts: readWholeNumber(reader, fields.get('max_attempts'), 1, 1_000) ?? defaults.maxAttempts,
    resultTtlMs: readBoundedDuration(reader, fields.get('result_ttl'), 1_000, 365 * DAY) ?? defaults.resultTtlMs,
    reclaimAfterMs: readBoundedDuration(reader, fields.get('reclaim_after'), 100, DAY) ?? defaults.reclaimAfterMs,
  };
}

/** Whether every path a route's match takes starts with the status prefix (the status path would shadow it). */
function shadowedByStatus(route: RouteConfig): boolean {
  const start = route.match.prefix ?? route.match.path;
  const reserved = DEFERRED_STATUS_PREFIX.slice(0, -1);
  return start !== undefined && (start === reserved || start.startsWith(DEFERRED_STATUS_PREFIX));
}

/** With some route deferring: refuses routes the status path would hide, and two defer routes on one queue. */
export function checkDeferRoutes(reader: DocumentReader, routes: readonly { route: RouteConfig; map: YAMLMap; path: string }[]): void {
  if (!routes.some(({ route }) => route.onLimit === 'defer')) return;
  const queues = new Map<string, string>();
  for (const { route, map, path } of routes) {
    if (shadowedByStatus(route)) {
      reader.report(map, `${path}.match`, `paths under ${DEFERRED_STATUS_PREFIX} are the deferred tickets' status URLs while a route defers; move this route elsewhere`);
    }
    if (route.defer === undefined) continue;
    const other = queues.get(route.defer.queue);
    if (other !== undefined) reader.report(map, `${path}.defer.queue`, `queue ${JSON.stringify(route.defer.queue)} is already the queue of ${other}; give each defer route its own (defer: { queue: ... })`);
    else queues.set(route.defer.queue, path);
  }
}
