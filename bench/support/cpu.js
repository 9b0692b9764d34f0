// CPU accounting for benchmarks that run servers in child processes: what each of our processes,
// the load generator and everything else on the machine used, from /proc. Shared by
// bench/service.js and bench/http-middleware.js.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { children } from './children.js';

/** Clock ticks per second of /proc times (USER_HZ, 100 on Linux). */
export const CLK_TCK = 100;

export function commandExists(command) {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Busy CPU seconds of the machine (steal excluded, reported apart), from /proc/stat. */
function machineCpu() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, , , irq, softirq, steal] = fields;
  return { busy: (user + nice + system + irq + softirq) / CLK_TCK, steal: (steal ?? 0) / CLK_TCK };
}

/** CPU seconds of one process (utime + stime) and of its live descendants (cluster workers), 0 if gone. */
function processCpu(pid) {
  let total = 0;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    total += (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return 0;
  }
  for (const child of childPids(pid)) total += processCpu(child);
  return total;
}

export function childPids(pid) {
  const pids = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      try {
        pids.push(...readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
      } catch {
        // The thread ended.
      }
    }
  } catch {
    // The process ended.
  }
  return pids;
}

/** CPU used so far by the machine, by each child process (by name) and by this process. */
export function snapshotCpu() {
  const perPid = {};
  for (const [pid, { name }] of children) perPid[name] = { pid, cpu: processCpu(pid) };
  const self = process.cpuUsage();
  return { at: performance.now(), machine: machineCpu(), perPid, self: (self.user + self.system) / 1e6 };
}

/** Cores used between two snapshots: each of our processes, ourselves, the load generator, and everything else. */
export function cpuBetween(a, b, loadGeneratorSeconds = 0) {
  const seconds = (b.at - a.at) / 1000;
  const ours = {};
  let oursTotal = 0;
  for (const [name, { pid, cpu }] of Object.entries(b.perPid)) {
    const before = a.perPid[name]?.pid === pid ? a.perPid[name].cpu : cpu;
    ours[name] = (cpu - before) / seconds;
    oursTotal += cpu - before;
  }
  const self = b.self - a.self;
  const busy = b.machine.busy - a.machine.busy;
  return {
    seconds,
    machineCores: busy / seconds,
    stealCores: (b.machine.steal - a.machine.steal) / seconds,
    servers: ours,
    loadGeneratorCores: loadGeneratorSeconds / seconds,
    foreignCores: Math.max(0, (busy - oursTotal - self - loadGeneratorSeconds) / seconds),
  };
}

/**
 * Waits until processes other than ours use at most `limitCores` (for up to `maxWaitS`), sampling
 * every `sampleMs`. `waitedMs()` is the total waited so far, for the report.
 */
export function quietWaiter({ limitCores, maxWaitS, sampleMs }) {
  let waitedTotalMs = 0;
  return {
    async wait() {
      const started = performance.now();
      let foreign;
      for (;;) {
        const a = snapshotCpu();
        await sleep(sampleMs);
        foreign = cpuBetween(a, snapshotCpu()).foreignCores;
        if (foreign <= limitCores || performance.now() - started > maxWaitS * 1000) break;
      }
      const waitedMs = Math.round(performance.now() - started) - sampleMs;
      waitedTotalMs += waitedMs;
      return { foreignBeforeCores: foreign, waitedMs, loadavg1: loadavg()[0] };
    },
    waitedMs: () => waitedTotalMs,
  };
}
