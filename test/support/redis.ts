/**
 * Real Redis servers for tests: `redis-server` processes on free ports, started and stopped by the
 * test itself (single node, or a real Redis Cluster built with `redis-cli --cluster create`).
 * Nothing persists to disk. No mocks of Redis anywhere.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
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

/** A port that was free a moment ago. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

function cli(port: number, args: string[]): string {
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

export function launch(port: number, dir: string, extra: string[]): ChildProcess {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, ...extra],
    { stdio: 'ignore' },
  );
  return child;
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

/** Starts one redis-server on a free port. */
export async function startRedis(extra: string[] = []): Promise<RedisServer> {
  return startRedisOn(await freePort(), extra);
}

/** Starts one redis-server on `port` (e.g. one a service was already told to use while nothing listened there). */
export async function startRedisOn(port: number, extra: string[] = []): Promise<RedisServer> {
  requireBinary('redis-server');
  requireBinary('redis-cli');
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-redis-'));
  let child = launch(port, dir, extra);
  const ping = (): boolean => pings(port);
  await waitFor(ping, `redis-server on port ${port}`);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return child.pid!;
    },
    cli: (...args) => cli(port, args),
    async restart() {
      await stopProcess(child);
      mkdirSync(dir, { recursive: true }); // stop() removed it
      child = launch(port, dir, extra);
      await waitFor(ping, `redis-server restart on port ${port}`);
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
  // One after the other: ports picked at the same moment could collide.
  for (let i = 0; i < masters * (1 + replicas); i++) servers.push(await startRedis(flags));
  const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
  const created = spawnSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], {
    encoding: 'utf8',
  });
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
  for (const server of servers) {
    await waitFor(() => /cluster_state:ok/.test(server.cli('CLUSTER', 'INFO')), `cluster state ok on ${server.port}`);
    await waitFor(() => !/role:slave/.test(server.cli('INFO', 'replication')) || /master_link_status:up/.test(server.cli('INFO', 'replication')), `replica ${server.port} in sync`);
  }
  return {
    nodes: servers.map((server) => ({ host: '127.0.0.1', port: server.port })),
    servers,
    async stop() {
      await Promise.all(servers.map((server) => server.stop()));
    },
  };
}
