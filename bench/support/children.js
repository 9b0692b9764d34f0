// Child processes of a benchmark: every one is recorded and killed by its PID, nothing else, also
// when the benchmark is interrupted. Shared by bench/service.js and bench/http-middleware.js.
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/** pid → { name, proc } of every child still running. */
export const children = new Map();

export function startChild(name, command, args, options = {}) {
  const proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  children.set(proc.pid, { name, proc });
  let output = '';
  const keep = (chunk) => {
    output = (output + chunk).slice(-4000);
  };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  proc.on('exit', () => children.delete(proc.pid));
  return { name, pid: proc.pid, proc, output: () => output };
}

export async function stopChild(child, graceMs = 5_000) {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  const exited = new Promise((resolve) => child.proc.once('exit', resolve));
  process.kill(child.pid, 'SIGTERM');
  const timer = sleep(graceMs).then(() => 'timeout');
  if ((await Promise.race([exited, timer])) === 'timeout') {
    process.kill(child.pid, 'SIGKILL');
    await exited;
  }
}

export function killAllNow() {
  for (const pid of children.keys()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}
process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    killAllNow();
    process.exit(130);
  });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

export function canConnect(port) {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Waits until `child` accepts connections on `port` (and, if given, has printed `marker`). */
export async function waitForPort(child, port, { marker, timeoutMs = 15_000 } = {}) {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (child.proc.exitCode !== null) throw new Error(`${child.name} exited (${child.proc.exitCode}): ${child.output()}`);
    if ((marker === undefined || child.output().includes(marker)) && (await canConnect(port))) return;
    await sleep(50);
  }
  throw new Error(`${child.name} did not listen on ${port}: ${child.output()}`);
}
