// Servers under `node --trace-gc`, and the young-generation collections their trace shows
// (bench/service-garbage.js, bench/service-half-load.js).
import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { children, freePort, waitForPort } from './children.js';

/** Scavenges in a --trace-gc log: bytes each freed, and its pause. */
export function scavenges(log) {
  const found = [];
  for (const m of log.matchAll(/Scavenge\S*\s+([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB, ([\d.]+)/g)) {
    found.push({ freed: (Number(m[1]) - Number(m[2])) * 2 ** 20, pauseMs: Number(m[3]) });
  }
  return found;
}

/** A node server (`args(port)`) under --trace-gc, on a free port, its output (the GC trace) in a file of `workDir`. */
export async function startTraced(name, args, workDir) {
  const port = await freePort();
  const logFile = join(workDir, `${name}.log`);
  const fd = openSync(logFile, 'w');
  const proc = spawn(process.execPath, ['--trace-gc', ...args(port)], { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.set(proc.pid, { name, proc });
  proc.on('exit', () => children.delete(proc.pid));
  const child = { name, pid: proc.pid, proc, output: () => readFileSync(logFile, 'utf8').slice(-2000) };
  await waitForPort(child, port);
  return { ...child, port, logFile };
}
