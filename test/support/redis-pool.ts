/**
 * A pool of Redis servers shared by the test files of one `vitest run`: a single Redis and a
 * 3-master Cluster per slot, started by the first file that leases the slot and stopped by the
 * run's global teardown (./redis-pool.setup.ts). Starting a Cluster costs seconds; a slot is
 * started once per worker instead of once per file.
 *
 * A file holds its slot alone (a lock directory made with mkdir, which only one process can make),
 * so nothing runs on the servers but that file's tests; each lease starts from empty servers
 * (FLUSHALL, FUNCTION FLUSH, SCRIPT FLUSH, CONFIG RESETSTAT). Never kill, pause, restart or
 * reconfigure a leased server: a file that does starts its own with ./redis.ts.
 *
 * Without a pool (the `fault` project, or a run without the global setup) nothing is leased and the
 * caller starts servers of its own.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { cli as cliSync, cliAsync, logTail, startCluster, startRedis, type RedisCluster, type RedisServer } from './redis.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The pool's directory (locks and the servers' records), from ./redis-pool.setup.ts. */
    redisPool?: string;
  }
}

/** What a slot's record keeps of one server: enough to reach it, read its log and stop it. */
export interface PooledServerRecord {
  readonly port: number;
  readonly pid: number;
  /** The server's --dir, where its log is. */
  readonly dir: string;
}

interface SlotRecord {
  readonly single: PooledServerRecord;
  readonly cluster: readonly PooledServerRecord[];
}

/** The servers of one slot, held by this file until {@link release}. */
export interface PooledRedis {
  readonly single: RedisServer;
  readonly cluster: RedisCluster;
  /** Gives the slot back (the servers keep running for the next file). */
  release(): void;
}

/** More slots than workers ever run at once; a slot is only started when leased. */
const SLOTS = 8;
const RECORD = 'servers.json';

/** The record files of every slot of the pool in `pool` (for the teardown). */
export function slotRecords(pool: string): PooledServerRecord[] {
  return Array.from({ length: SLOTS }, (_, slot) => join(pool, `slot-${slot}`, RECORD))
    .filter((path) => existsSync(path))
    .flatMap((path) => {
      const record = JSON.parse(readFileSync(path, 'utf8')) as SlotRecord;
      return [record.single, ...record.cluster];
    });
}

/** Leases a free slot of the run's pool, started or emptied; undefined when there is no pool or no free slot. */
export async function leasePooledRedis(): Promise<PooledRedis | undefined> {
  const pool = inject('redisPool');
  if (pool === undefined) return undefined;
  for (let slot = 0; slot < SLOTS; slot++) {
    const dir = join(pool, `slot-${slot}`);
    const lock = join(dir, 'lock');
    mkdirSync(dir, { recursive: true });
    try {
      mkdirSync(lock);
    } catch {
      continue; // another file holds it
    }
    const release = (): void => rmSync(lock, { recursive: true, force: true });
    try {
      const record = await readyRecord(join(dir, RECORD));
      return { single: pooledServer(record.single), cluster: pooledCluster(record.cluster), release };
    } catch (error) {
      release();
      throw error;
    }
  }
  return undefined;
}

/** The slot's servers emptied, or started (and recorded) when the slot is new or one of its servers is gone. */
async function readyRecord(path: string): Promise<SlotRecord> {
  if (existsSync(path)) {
    const record = JSON.parse(readFileSync(path, 'utf8')) as SlotRecord;
    const servers = [record.single, ...record.cluster];
    if ((await Promise.all(servers.map(emptied))).every(Boolean) && /cluster_state:ok/.test(await cliAsync(record.cluster[0]!.port, 'CLUSTER', 'INFO'))) return record;
    stopRecorded(servers); // a server died or the Cluster is not whole: start the slot anew
    rmSync(path);
  }
  const [single, cluster] = await Promise.all([startRedis(), startCluster(3)]);
  // The log stays where the server writes it, its --dir, for a failure message of a later file.
  const keep = (server: RedisServer): PooledServerRecord => ({ port: server.port, pid: server.pid, dir: server.cli('CONFIG', 'GET', 'dir').split('\n')[1]!.trim() });
  const record: SlotRecord = { single: keep(single), cluster: cluster.servers.map(keep) };
  writeFileSync(path, JSON.stringify(record));
  return record;
}

/** Empties a server for the next file: no keys, functions, scripts or command statistics. False when it does not answer. */
async function emptied(server: PooledServerRecord): Promise<boolean> {
  const client = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  try {
    await client.connect();
    await client.flushall();
    await client.call('FUNCTION', 'FLUSH');
    await client.script('FLUSH');
    await client.config('RESETSTAT');
    return true;
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Stops recorded servers and removes their directories (their logs with them). */
export function stopRecorded(servers: readonly PooledServerRecord[]): void {
  for (const server of servers) {
    try {
      process.kill(server.pid, 'SIGKILL');
    } catch {
      // already gone
    }
    rmSync(server.dir, { recursive: true, force: true });
  }
}

function refuse(what: string, port: number): () => Promise<void> {
  return () => Promise.reject(new Error(`the pooled Redis on port ${port} is shared by other test files: ${what} one of your own (startRedis / useRedisCluster)`));
}

function pooledServer({ port, pid, dir }: PooledServerRecord): RedisServer {
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    pid,
    cli: (...args) => cliSync(port, args),
    logTail: () => logTail(dir),
    restart: refuse('restart', port),
    stop: refuse('stop', port),
  };
}

function pooledCluster(records: readonly PooledServerRecord[]): RedisCluster {
  const servers = records.map(pooledServer);
  return { nodes: servers.map((server) => ({ host: '127.0.0.1', port: server.port })), servers, stop: refuse('stop', servers[0]!.port) };
}
