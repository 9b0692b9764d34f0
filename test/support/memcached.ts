/**
 * Real memcached servers for tests: `memcached` processes on free ports (reserved as the Redis
 * servers' are: test/support/redis.ts `freePort`), started and stopped by PID by the test itself.
 * Each server's output is kept in a log file, so one that did not start says why in the failure.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { freePort, stopProcess } from './redis.js';

export interface MemcachedServer {
  readonly port: number;
  /** `127.0.0.1:<port>`, as `memcachedStore({ servers })` takes it. */
  readonly address: string;
  readonly pid: number;
  /** Kills the server (SIGKILL, by its PID): everything it held is lost. */
  stop(): Promise<void>;
  /** Starts it again on the same port (after stop()). */
  restart(): Promise<void>;
  /** The last lines of the server's output, for a failure message. */
  logTail(): string;
}

const START_TIMEOUT_MS = 20_000;
const START_ATTEMPTS = 3;

function requireMemcached(): void {
  if (spawnSync('sh', ['-c', 'command -v memcached']).status !== 0) {
    throw new Error('memcached is not on PATH: install it (Debian: apt-get install memcached) to run the Memcached tests');
  }
}

function launch(port: number, log: string, extra: string[]): ChildProcess {
  const fd = openSync(log, 'a');
  try {
    // -U 0: no UDP; -u: memcached refuses to run as root without naming a user.
    const user = process.getuid?.() === 0 ? ['-u', 'root'] : [];
    return spawn('memcached', ['-p', String(port), '-l', '127.0.0.1', '-U', '0', '-m', '64', '-v', ...user, ...extra], { stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
}

/** Whether a memcached on `port` answers `version`. */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('version\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('VERSION')));
  });
}

function tail(log: string, lines = 20): string {
  return existsSync(log) ? readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n') : '';
}

async function waitUp(child: ChildProcess, port: number, log: string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`memcached on port ${port} exited (${child.exitCode ?? child.signalCode}); its log:\n${tail(log)}`);
    if (await answers(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await stopProcess(child);
  throw new Error(`timed out after ${START_TIMEOUT_MS} ms waiting for memcached on port ${port}; its log:\n${tail(log)}`);
}

/** Starts memcached on a free port (another if that start fails); `extra` flags are memcached's own. */
export async function startMemcached(extra: string[] = []): Promise<MemcachedServer> {
  requireMemcached();
  const failures: string[] = [];
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-memcached-'));
    const log = join(dir, 'memcached.log');
    let child = launch(port, log, extra);
    try {
      await waitUp(child, port, log);
    } catch (error) {
      failures.push(`attempt ${attempt}: ${(error as Error).message}`);
      await stopProcess(child);
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    return {
      port,
      address: `127.0.0.1:${port}`,
      get pid() {
        return child.pid!;
      },
      async stop() {
        await stopProcess(child);
      },
      async restart() {
        await stopProcess(child);
        child = launch(port, log, extra);
        await waitUp(child, port, log);
      },
      logTail: () => tail(log),
    };
  }
  throw new Error(`memcached did not start in ${START_ATTEMPTS} attempts:\n${failures.join('\n')}`);
}

/**
 * One memcached for a test file (or a `describe`): started before its tests, stopped after them.
 * The returned function gives the running server.
 */
export function useMemcached(): () => MemcachedServer {
  let server: MemcachedServer | undefined;
  beforeAll(async () => {
    server = await startMemcached();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });
  return () => server!;
}
