/**
 * Real Redis servers for tests: `redis-server` processes on free ports, started and stopped by the
 * test itself (single node, or a real Redis Cluster built with `redis-cli --cluster create`).
 * Nothing persists to disk but each server's log, kept in its directory so that a server that did
 * not start says why in the failure. No mocks of Redis anywhere.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** Redis CLI against this server; returns stdout. */
  cli(...args: string[]): string;
  /** Stops and starts the server on the same port (everything in memory is lost, scripts too); after stop() too. */
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** The last lines of the server's log (stdout and stderr), for a failure message. */
  logTail(): string;
}

export interface RedisCluster {
  /** Every node, masters and replicas alike (ioredis finds the roles itself). */
  readonly nodes: readonly { host: string; port: number }[];
  readonly servers: readonly RedisServer[];
  stop(): Promise<void>;
}

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** Replicas per master (`--cluster-replicas`), default 0. */
  readonly replicas?: number;
  /** `--cluster-node-timeout` in ms: how long a silent node takes to be failed. Default 2,000, or 1,000 with replicas. */
  readonly nodeTimeoutMs?: number;
}

export function requireBinary(name: string): void {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  if (found.status !== 0) {
    throw new Error(`${name} is not on PATH: install it (Debian: apt-get install redis-server redis-tools) to run the Redis tests`);
  }
}

/** A Redis Cluster node also listens on its data port + 10,000 (the cluster bus). */
export const CLUSTER_BUS_OFFSET = 10_000;

/**
 * A port that was free a moment ago. With `bus`, one whose Cluster bus port (+10,000) was free too:
 * a Cluster node needs both, and a node whose bus port is taken dies at start.
 */
export async function freePort(bus = false): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindAndRelease(0);
    if (!bus) return port;
    if (port + CLUSTER_BUS_OFFSET > 65_535) continue;
    if ((await bindAndRelease(port + CLUSTER_BUS_OFFSET).catch(() => undefined)) !== undefined) return port;
  }
  throw new Error('no free port with a free Cluster bus port (+10000) after 50 tries');
}

/** Binds `port` (0: any) on 127.0.0.1, closes it and resolves with the port bound. */
function bindAndRelease(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** `redis-cli -p port args...`; returns stdout. */
export function cli(port: number, args: string[]): string {
  const result = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`redis-cli ${args.join(' ')} failed: ${result.stderr}`);
  return result.stdout;
}

/** `redis-cli -p port args...`, without blocking the event loop (a test's own load keeps running); resolves with stdout. */
export function cliAsync(port: number, ...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 5_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`redis-cli -p ${port} ${args.join(' ')} failed: ${stderr || error.message}`));
      else resolve(stdout);
    });
  });
}

/** Whether a Redis on `port` answers PING now. */
export function pings(port: number): boolean {
  return spawnSync('redis-cli', ['-p', String(port), 'PING'], { encoding: 'utf8' }).stdout.trim() === 'PONG';
}

export async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Where {@link launch} writes a server's stdout and stderr: its `--dir`. */
export function logFileOf(dir: string): string {
  return join(dir, 'redis-server.log');
}

/** The last `lines` lines of a server's log, for a failure message ('' when there is none). */
export function logTail(dir: string, lines = 20): string {
  if (!existsSync(logFileOf(dir))) return '';
  return readFileSync(logFileOf(dir), 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
}

/** Starts redis-server on `port`, its output appended to {@link logFileOf}(`dir`) (kept for failure messages). */
export function launch(port: number, dir: string, extra: string[]): ChildProcess {
  const log = openSync(logFileOf(dir), 'a');
  try {
    return spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra],
      { stdio: ['ignore', log, log] },
    );
  } finally {
    closeSync(log); // the child has its own copy
  }
}

/**
 * Waits until the server on `port` answers PING. Fails at once if it exited, and either way with
 * the tail of its log, which says why (a port taken, a bad flag).
 */
async function waitForServer(child: ChildProcess, port: number, dir: string, what: string): Promise<void> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new RedisStartError(`${what} exited (${child.exitCode ?? child.signalCode}) before answering PING; its log:\n${logTail(dir)}`);
    }
    if (await pingsAsync(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  await stopProcess(child);
  throw new RedisStartError(`timed out after ${START_TIMEOUT_MS} ms waiting for ${what}; its log:\n${logTail(dir)}`);
}

/** How long a redis-server may take to answer its first PING: generous, for a machine busy with other work. */
const START_TIMEOUT_MS = 30_000;
/** How long a Cluster may take to agree that every slot is served, and a replica to sync. */
const CLUSTER_WAIT_MS = 30_000;
/** Starts tried on fresh ports before giving up (a port can be taken between the check and the bind). */
const START_ATTEMPTS = 3;

/** A redis-server that did not come up; the message carries its log's tail. */
export class RedisStartError extends Error {}

/** Whether a Redis on `port` answers PING, without blocking the event loop. */
function pingsAsync(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('redis-cli', ['-p', String(port), 'PING'], { encoding: 'utf8', timeout: 5_000 }, (error, stdout) => resolve(error === null && stdout.trim() === 'PONG'));
  });
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/**
 * Starts one redis-server on a free port (with `--cluster-enabled yes` among `extra`, one whose bus
 * port is free too), on another port if that start fails.
 */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  const cluster = extra.includes('--cluster-enabled');
  const failures: string[] = [];
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    try {
      return await startRedisOn(await freePort(cluster), extra);
    } catch (error) {
      if (!(error instanceof RedisStartError)) throw error;
      failures.push(`attempt ${attempt}: ${error.message}`);
    }
  }
  throw new Error(`redis-server did not start in ${START_ATTEMPTS} attempts:\n${failures.join('\n')}`);
}

/** Starts one redis-server on `port` (e.g. one a service was already told to use while nothing listened there). */
export async function startRedisOn(port: number, extra: string[] = []): Promise<RedisServer> {
  requireBinary('redis-server');
  requireBinary('redis-cli');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
  let child = launch(port, dir, extra);
  try {
    await waitForServer(child, port, dir, `redis-server on port ${port}`);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child.pid!;
    },
    cli: (...args) => cli(port, args),
    logTail: () => logTail(dir),
    async restart() {
      await stopProcess(child);
      mkdirSync(dir, { recursive: true }); // stop() removed it
      child = launch(port, dir, extra);
      await waitForServer(child, port, dir, `redis-server restart on port ${port}`);
    },
    async stop() {
      await stopProcess(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Starts a Redis Cluster of `masters` masters (and `replicas` replicas each) and waits until every
 * slot is served and every replica is in sync with its master.
 */
export async function startCluster(masters = 3, options: ClusterOptions = {}): Promise<RedisCluster> {
  const replicas = options.replicas ?? 0;
  const nodeTimeout = options.nodeTimeoutMs ?? (replicas > 0 ? 1_000 : 2_000);
  const flags = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(nodeTimeout)];
  const servers: RedisServer[] = [];
  try {
    // One after the other: ports picked at the same moment could collide.
    for (let i = 0; i < masters * (1 + replicas); i++) servers.push(await startRedis(flags));
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    const created = spawnSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], {
      encoding: 'utf8',
    });
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    for (const server of servers) {
      await waitFor(() => /cluster_state:ok/.test(server.cli('CLUSTER', 'INFO')), `cluster state ok on ${server.port}`, CLUSTER_WAIT_MS);
      await waitFor(() => !/role:slave/.test(server.cli('INFO', 'replication')) || /master_link_status:up/.test(server.cli('INFO', 'replication')), `replica ${server.port} in sync`, CLUSTER_WAIT_MS);
    }
  } catch (error) {
    const logs = servers.map((server) => `--- redis-server on port ${server.port}:\n${server.logTail()}`).join('\n');
    await Promise.all(servers.map((server) => server.stop()));
    throw new Error(`${(error as Error).message}\nthe nodes' logs:\n${logs}`, { cause: error });
  }
  return {
    nodes: servers.map((server) => ({ host: '127.0.0.1', port: server.port })),
    servers,
    async stop() {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}
