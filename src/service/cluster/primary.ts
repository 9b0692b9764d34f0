/**
 * The primary's side of the workers' reports (`tollgate serve --workers N`): it collects the
 * workers' metrics when one of them is scraped, and their dashboard counts once a second, and keeps
 * what a worker that exited had counted, so that sums over the workers never go back when the
 * primary starts another in its place. See workers.ts for the messages.
 */
import cluster, { type Worker } from 'node:cluster';
import { BlockList } from '../check/blocks.js';
import { isClusterMessage, type ClusterMessage, type CollectedReports, type ReportKind, type WorkerReport } from './workers.js';
import { ClusterDashboard, foldDashboardReports } from './dashboard-merge.js';
import { foldMetricReports } from './metrics-merge.js';

/** How long the primary waits for the workers' reports; a late worker counts with its previous one. */
export const REPORT_TIMEOUT_MS = 1_000;

/** What an exited worker leaves: its last report, folded with the other exited ones (counters only). */
const FOLD: Record<ReportKind, (reports: readonly unknown[]) => unknown | Promise<unknown>> = {
  metrics: foldMetricReports,
  dashboard: foldDashboardReports,
};

interface Pending {
  readonly kind: ReportKind;
  readonly awaited: Set<number>;
  readonly done: () => void;
}

/** The workers' last reports, by kind and worker id, and what exited workers left. */
export class WorkerReports {
  private readonly last: Record<ReportKind, Map<number, WorkerReport>> = { metrics: new Map(), dashboard: new Map() };
  /** Folding may take a turn (prom-client's JSON is async): a collection waits for it. */
  private readonly exited: Record<ReportKind, Promise<unknown>> = { metrics: Promise.resolve(undefined), dashboard: Promise.resolve(undefined) };
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  /** Asks every live worker for a report of `kind`; resolves with all of them (late ones: their previous). */
  collect(kind: ReportKind): Promise<CollectedReports> {
    const workers = liveWorkers();
    const id = this.nextId++;
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        this.pending.delete(id);
        const live = workers.filter((worker) => !worker.isDead()).map((worker) => this.last[kind].get(worker.id)).filter((report) => report !== undefined);
        void this.exited[kind].then((exited) => resolve({ live, exited }));
      };
      const timer = setTimeout(finish, REPORT_TIMEOUT_MS);
      const awaited = new Set(workers.map((worker) => worker.id));
      if (awaited.size === 0) return finish();
      this.pending.set(id, { kind, awaited, done: finish });
      for (const worker of workers) sendTo(worker, { tollgate: 'report', id, kind });
    });
  }

  /** A worker's report arrived. */
  reported(worker: Worker, id: number, kind: ReportKind, data: unknown): void {
    this.last[kind].set(worker.id, { worker: worker.id, pid: worker.process.pid ?? 0, data });
    const pending = this.pending.get(id);
    if (pending === undefined || pending.kind !== kind) return;
    pending.awaited.delete(worker.id);
    if (pending.awaited.size === 0) pending.done();
  }

  /** A worker exited: its last reports join what exited workers left; nobody waits for it any more. */
  exit(worker: Worker): void {
    for (const kind of Object.keys(this.last) as ReportKind[]) {
      const report = this.last[kind].get(worker.id);
      if (report === undefined) continue;
      this.last[kind].delete(worker.id);
      this.exited[kind] = this.exited[kind].then((left) => FOLD[kind](left === undefined ? [report.data] : [left, report.data]));
    }
    for (const pending of [...this.pending.values()]) {
      pending.awaited.delete(worker.id);
      if (pending.awaited.size === 0) pending.done();
    }
  }
}

function liveWorkers(): Worker[] {
  return Object.values(cluster.workers ?? {}).filter((worker): worker is Worker => worker !== undefined && !worker.isDead() && worker.isConnected());
}

function sendTo(worker: Worker, message: ClusterMessage): void {
  if (worker.isConnected()) worker.send(message, (error: Error | null) => void error);
}

/** How often the primary merges the dashboards' counts and sends the second to every worker (ms). */
export const DASHBOARD_TICK_MS = 1_000;

/**
 * Starts the primary's part: answers the workers' `collect`, keeps exited workers' counts, sends
 * every worker the dashboard's merged second once a second, and relays blocks set on one worker to
 * the others (keeping them for workers started later). Returns what stops it.
 */
export function startReportsPrimary(): { stop(): void } {
  const reports = new WorkerReports();
  const blocks = new BlockList();
  const onMessage = (worker: Worker, message: unknown): void => {
    if (!isClusterMessage(message)) return;
    if (message.tollgate === 'reported') reports.reported(worker, message.id, message.kind, message.data);
    else if (message.tollgate === 'block-change') {
      // The primary keeps the blocks in force, for workers started later.
      blocks.apply(message.change);
      for (const other of liveWorkers()) if (other !== worker) sendTo(other, message);
    } else if (message.tollgate === 'blocks-please') {
      for (const block of blocks.list()) sendTo(worker, { tollgate: 'block-change', change: { op: 'block', ...block } });
    }
    else if (message.tollgate === 'collect') {
      void reports.collect(message.kind).then((collected) => sendTo(worker, { tollgate: 'collected', id: message.id, reports: collected }));
    }
  };
  const onExit = (worker: Worker): void => reports.exit(worker);
  cluster.on('message', onMessage);
  cluster.on('exit', onExit);

  const dashboard = new ClusterDashboard();
  let ticking = false;
  const timer = setInterval(() => {
    // One collection at a time: a slow one is not stacked on.
    if (ticking) return;
    ticking = true;
    void reports
      .collect('dashboard')
      .then((collected) => {
        const second = dashboard.merge(collected, Date.now());
        for (const worker of liveWorkers()) sendTo(worker, { tollgate: 'dashboard-second', data: second });
      })
      .finally(() => (ticking = false));
  }, DASHBOARD_TICK_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      cluster.off('message', onMessage);
      cluster.off('exit', onExit);
    },
  };
}
