/**
 * What the workers of `tollgate serve --workers N` tell each other, through the primary (node:cluster
 * IPC): a worker that answers /metrics asks the primary to collect every worker's report; the
 * primary asks each worker, keeps each one's last report (and the last report of workers that died,
 * so a sum never goes back), and answers with them all. Every second the primary also collects the
 * dashboard's reports and sends the merged second to every worker (dashboard.ts).
 *
 * Blocks set or lifted on one worker are relayed to the others the same way (blocks.ts).
 *
 * Nothing here runs on a decision: messages flow only when /metrics is scraped, once a second for
 * the dashboard, and on an admin block, and only with more than one worker (one worker never enters
 * this file).
 */
import cluster from 'node:cluster';

/** What is collected: Prometheus metrics (prom-client's JSON) or the dashboard's counts. */
export type ReportKind = 'metrics' | 'dashboard';

/** One worker's report as the primary holds it. */
export interface WorkerReport {
  /** The cluster's worker id (a restarted worker gets a new one). */
  readonly worker: number;
  readonly pid: number;
  readonly data: unknown;
}

/** Everything the primary holds for one kind: live workers' last reports, and what exited workers left. */
export interface CollectedReports {
  readonly live: readonly WorkerReport[];
  /** The exited workers' last reports folded into one (counters only), or undefined when none exited. */
  readonly exited: unknown;
}

/** A block set or lifted (blocks.ts), as shared between workers. `domain` is a domain or `*`. */
export type BlockChange =
  | { readonly op: 'block'; readonly key: string; readonly domain: string; readonly until: number }
  | { readonly op: 'unblock'; readonly key: string; readonly domain: string };

/** Messages between the primary and a worker; `tollgate` tells them apart from other IPC. */
export type ClusterMessage =
  | { readonly tollgate: 'collect'; readonly id: number; readonly kind: ReportKind }
  | { readonly tollgate: 'report'; readonly id: number; readonly kind: ReportKind }
  | { readonly tollgate: 'reported'; readonly id: number; readonly kind: ReportKind; readonly data: unknown }
  | { readonly tollgate: 'collected'; readonly id: number; readonly reports: CollectedReports }
  | { readonly tollgate: 'dashboard-second'; readonly data: unknown }
  /** A block set or lifted on one worker (to the primary, then from it to the others). */
  | { readonly tollgate: 'block-change'; readonly change: BlockChange }
  /** A worker that starts asks for the blocks in force (answered with `block-change`s). */
  | { readonly tollgate: 'blocks-please' };

export function isClusterMessage(message: unknown): message is ClusterMessage {
  return typeof message === 'object' && message !== null && typeof (message as { tollgate?: unknown }).tollgate === 'string';
}

/** How long a worker waits for the primary's answer before the caller falls back (ms). */
export const COLLECT_TIMEOUT_MS = 2_000;

/** A worker's side: answers the primary's requests for reports, and asks it to collect. */
export class WorkerLink {
  private readonly producers = new Map<ReportKind, () => unknown>();
  private readonly waiting = new Map<number, (reports: CollectedReports) => void>();
  private readonly listeners = new Set<(data: unknown) => void>();
  private readonly blockListeners = new Set<(change: BlockChange) => void>();
  private nextId = 1;

  constructor() {
    // Lives as long as the worker (one per process, shared by the metrics and the dashboard).
    process.on('message', (message: unknown) => this.receive(message));
  }

  /** What this worker reports when asked for `kind` (a promise is awaited). */
  produce(kind: ReportKind, producer: () => unknown): void {
    this.producers.set(kind, producer);
  }

  /** Hears the merged dashboard second the primary sends every second. */
  onDashboardSecond(listener: (data: unknown) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Hears blocks set or lifted on other workers. */
  onBlockChange(listener: (change: BlockChange) => void): void {
    this.blockListeners.add(listener);
  }

  /** Tells the other workers (through the primary) of a block set or lifted here. */
  sendBlockChange(change: BlockChange): void {
    send({ tollgate: 'block-change', change });
  }

  /** Asks the primary for the blocks in force (they arrive as block changes). */
  askForBlocks(): void {
    send({ tollgate: 'blocks-please' });
  }

  /** Every worker's last report of `kind`; rejects after {@link COLLECT_TIMEOUT_MS}. */
  collect(kind: ReportKind): Promise<CollectedReports> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`the primary did not answer within ${COLLECT_TIMEOUT_MS} ms`));
      }, COLLECT_TIMEOUT_MS);
      this.waiting.set(id, (reports) => {
        clearTimeout(timer);
        resolve(reports);
      });
      send({ tollgate: 'collect', id, kind });
    });
  }

  private receive(message: unknown): void {
    if (!isClusterMessage(message)) return;
    if (message.tollgate === 'collected') {
      const resolve = this.waiting.get(message.id);
      this.waiting.delete(message.id);
      resolve?.(message.reports);
    } else if (message.tollgate === 'report') {
      this.report(message.id, message.kind);
    } else if (message.tollgate === 'dashboard-second') {
      for (const listener of this.listeners) listener(message.data);
    } else if (message.tollgate === 'block-change') {
      for (const listener of this.blockListeners) listener(message.change);
    }
  }

  /**
   * Reports one after the other, so they reach the primary in the order their counts were read:
   * the primary keeps the last one it receives, and a sum must never go back.
   */
  private reporting: Promise<void> = Promise.resolve();

  private report(id: number, kind: ReportKind): void {
    const producer = this.producers.get(kind);
    if (producer === undefined) return;
    this.reporting = this.reporting.then(async () => {
      try {
        send({ tollgate: 'reported', id, kind, data: await producer() });
      } catch {
        // Not reported: the primary keeps this worker's previous report.
      }
    });
  }
}

function send(message: ClusterMessage): void {
  if (process.connected) process.send?.(message);
}

let link: WorkerLink | undefined;

/**
 * The worker's link to the primary when this process is one of several workers of `tollgate
 * serve` (`--workers N`, N > 1), else undefined: one process aggregates nothing.
 */
export function workerLink(workers: number): WorkerLink | undefined {
  if (workers <= 1 || !cluster.isWorker) return undefined;
  return (link ??= new WorkerLink());
}
