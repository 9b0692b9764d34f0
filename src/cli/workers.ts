/**
 * `tollgate serve --workers N`'s primary (node:cluster), apart from main.ts so that only a primary
 * with workers loads it.
 */
import cluster from 'node:cluster';
import { startReportsPrimary } from '../service/index.js';

/**
 * `--workers N`: N processes (node:cluster) share the HTTP and gRPC ports and one Redis. The primary
 * restarts a worker that dies unexpectedly and forwards SIGTERM/SIGINT for a graceful stop; it also
 * collects the workers' metrics and dashboard counts (service/cluster/primary.ts), keeping a dead worker's.
 */
export async function runWorkers(count: number): Promise<number> {
  let stopping = false;
  // /metrics and the dashboard sum the workers' counts, including those of workers that exited.
  const reports = startReportsPrimary();
  const fork = (): void => {
    cluster.fork().once('exit', (code) => {
      if (!stopping) {
        process.stderr.write(`tollgate serve: a worker exited (code ${code}); starting another\n`);
        fork();
      }
    });
  };
  for (let i = 0; i < count; i++) fork();
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      const workers = Object.values(cluster.workers ?? {}).filter((worker) => worker !== undefined);
      // A second signal is forwarded too: the workers skip the rest of their drain delay.
      if (!stopping) {
        let running = workers.length;
        if (running === 0) resolve();
        for (const worker of workers) {
          worker.once('exit', () => {
            running -= 1;
            if (running === 0) resolve();
          });
        }
      }
      stopping = true;
      for (const worker of workers) if (worker.process.exitCode === null) worker.process.kill('SIGTERM');
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  reports.stop();
  return 0;
}

