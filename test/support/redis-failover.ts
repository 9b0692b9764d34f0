/**
 * Topology changes on real Redis processes, for the fault tests: a Sentinel set whose primary can be
 * killed, a Cluster master killed until its replica takes over, and one hash slot moved between
 * masters under load (ASK, then MOVED). Admin commands go through `redis-cli` run asynchronously,
 * so a test's own load keeps running on the event loop while they wait.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import calculateSlot from 'cluster-key-slot';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cliAsync, freePort, requireBinary, startRedis, stopProcess, type RedisCluster, type RedisServer } from './redis.js';

/** Polls `check` (async) every 100 ms until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function poll<T>(check: () => Promise<T | undefined>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** A field of `INFO` output (`role`, `master_link_status`, ...). */
function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*?)\\r?$`, 'm').exec(info)?.[1];
}

/** `SENTINEL MASTER` output (name and value on alternate lines) as a map. */
function pairs(output: string): Map<string, string> {
  const lines = output.trim().split('\n');
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < lines.length; i += 2) map.set(lines[i]!.trim(), lines[i + 1]!.trim());
  return map;
}

export interface SentinelSet {
  readonly sentinels: readonly { host: string; port: number }[];
  readonly name: string;
  /** The data node the sentinels currently name primary. */
  primary(): RedisServer;
  /** The data node that was the replica at the start. */
  readonly replica: RedisServer;
  /** SIGKILLs the current primary's process (no shutdown, no last words to anyone). */
  killPrimary(): Promise<void>;
  /** Waits until every sentinel names a new primary and that node answers as master; its port. */
  waitForFailover(timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

function launchSentinel(port: number, dir: string, primaryPort: number, name: string): ChildProcess {
  const file = join(dir, `sentinel-${port}.conf`);
  // Sentinel rewrites its own config file (it records what it learns), so it lives in a temp dir.
  writeFileSync(
    file,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  return spawn('redis-server', [file, '--sentinel'], { stdio: 'ignore' });
}

/**
 * A primary, one replica and three sentinels (quorum 2, a node is down after 1 s of silence), all
 * on free ports; resolves once every sentinel knows the replica and the two other sentinels, and
 * the replica is in sync.
 */
export async function startSentinelSet(name = 'mymaster'): Promise<SentinelSet> {
  requireBinary('redis-server');
  const first = await startRedis();
  const replica = await startRedis(['--replicaof', '127.0.0.1', String(first.port)]);
  await poll(async () => (infoField(await cliAsync(replica.port, 'INFO', 'replication'), 'master_link_status') === 'up' ? true : undefined), 'replica in sync', 10_000);
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-sentinel-'));
  const sentinels: { port: number; child: ChildProcess }[] = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    sentinels.push({ port, child: launchSentinel(port, dir, first.port, name) });
  }
  for (const sentinel of sentinels) {
    await poll(
      async () => {
        const master = pairs(await cliAsync(sentinel.port, 'SENTINEL', 'MASTER', name));
        return master.get('num-slaves') === '1' && master.get('num-other-sentinels') === '2' ? true : undefined;
      },
      `sentinel ${sentinel.port} to see the replica and the other sentinels`,
      15_000,
    );
  }
  const data = [first, replica];
  let primaryPort = first.port;
  return {
    sentinels: sentinels.map((sentinel) => ({ host: '127.0.0.1', port: sentinel.port })),
    name,
    primary: () => data.find((server) => server.port === primaryPort)!,
    replica,
    async killPrimary() {
      process.kill(data.find((server) => server.port === primaryPort)!.pid, 'SIGKILL');
    },
    async waitForFailover(timeoutMs = 20_000) {
      const old = primaryPort;
      primaryPort = await poll(
        async () => {
          const named = await Promise.all(sentinels.map(async (s) => Number((await cliAsync(s.port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)).trim().split('\n')[1])));
          const port = named[0]!;
          if (port === old || named.some((other) => other !== port)) return undefined;
          return infoField(await cliAsync(port, 'INFO', 'replication'), 'role') === 'master' ? port : undefined;
        },
        'the sentinels to promote a new primary',
        timeoutMs,
      );
      return primaryPort;
    },
    async stop() {
      await Promise.all([...sentinels.map((sentinel) => stopProcess(sentinel.child)), first.stop(), replica.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One line of `CLUSTER NODES`. */
interface ClusterNodeLine {
  readonly id: string;
  readonly port: number;
  readonly flags: readonly string[];
  /** Slot ranges served, [from, to] inclusive. */
  readonly slots: readonly (readonly [number, number])[];
}

/** `CLUSTER NODES` as seen by the node on `port`. */
export async function clusterNodes(port: number): Promise<ClusterNodeLine[]> {
  const text = await cliAsync(port, 'CLUSTER', 'NODES');
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, , , , , , ...slots] = line.trim().split(' ');
      return {
        id: id!,
        port: Number(/:(\d+)@/.exec(address!)![1]),
        flags: flags!.split(','),
        slots: slots
          .filter((range) => !range.startsWith('['))
          .map((range) => {
            const [from, to] = range.split('-').map(Number);
            return [from!, to ?? from!] as const;
          }),
      };
    });
}

/** The port of the healthy master serving `slot`, as the node on `askPort` sees it (undefined if none). */
export async function slotOwner(askPort: number, slot: number): Promise<number | undefined> {
  const nodes = await clusterNodes(askPort);
  const owner = nodes.find((node) => node.flags.includes('master') && !node.flags.some((flag) => flag.startsWith('fail')) && node.slots.some(([from, to]) => slot >= from && slot <= to));
  return owner?.port;
}

/** The first key `${prefix}:${name}:${i}` (i = 0, 1, ...) whose hash slot is `slot`. */
export function keyInSlot(prefix: string, name: string, slot: number): string {
  for (let i = 0; ; i++) if (calculateSlot(`${prefix}:${name}:${i}`) === slot) return `${prefix}:${name}:${i}`;
}

/** The server of `cluster` on `port`. */
export function serverOn(cluster: RedisCluster, port: number): RedisServer {
  const server = cluster.servers.find((candidate) => candidate.port === port);
  if (server === undefined) throw new Error(`no cluster node on port ${port}`);
  return server;
}

/**
 * After the master on `deadPort` was killed: waits until another node serves `slot` as a healthy
 * master and every surviving node reports `cluster_state:ok`; the new master's port.
 */
export async function waitForClusterFailover(cluster: RedisCluster, deadPort: number, slot: number, timeoutMs = 20_000): Promise<number> {
  const survivors = cluster.servers.filter((server) => server.port !== deadPort);
  // One node first (few redis-cli processes while the test's load runs), then all of them.
  await poll(async () => {
    const owner = await slotOwner(survivors[0]!.port, slot);
    return owner !== undefined && owner !== deadPort ? owner : undefined;
  }, `a replica to take over slot ${slot} from ${deadPort}`, timeoutMs);
  return poll(
    async () => {
      const owners = await Promise.all(survivors.map((server) => slotOwner(server.port, slot)));
      if (owners.some((owner) => owner === undefined || owner === deadPort || owner !== owners[0])) return undefined;
      const states = await Promise.all(survivors.map((server) => cliAsync(server.port, 'CLUSTER', 'INFO')));
      return states.every((state) => /cluster_state:ok/.test(state)) ? owners[0] : undefined;
    },
    `a replica to take over slot ${slot} from ${deadPort}`,
    timeoutMs,
  );
}

/** Options of {@link migrateSlot}. */
export interface MigrateOptions {
  /** Keys moved per MIGRATE. Default 1, so the slot stays half-moved (ASK, TRYAGAIN) a while. */
  readonly keysPerStep?: number;
  /** Pause between two MIGRATE steps, and after the last before the slot is handed over, in ms. Default 50. */
  readonly pauseMs?: number;
}

/**
 * Moves `slot` to the master on `toPort` the way `redis-cli --cluster reshard` does: SETSLOT
 * IMPORTING on the target, MIGRATING on the source, MIGRATE its keys a few at a time (meanwhile
 * clients get ASK for keys already moved), then SETSLOT NODE everywhere (clients then get MOVED).
 * Resolves with the number of keys moved.
 */
export async function migrateSlot(cluster: RedisCluster, slot: number, toPort: number, options: MigrateOptions = {}): Promise<number> {
  const fromPort = await slotOwner(toPort, slot);
  if (fromPort === undefined || fromPort === toPort) throw new Error(`slot ${slot} has no other owner than ${toPort}`);
  const nodes = await clusterNodes(toPort);
  const idOf = (port: number): string => nodes.find((node) => node.port === port)!.id;
  const pause = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, options.pauseMs ?? 50));
  await cliAsync(toPort, 'CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', idOf(fromPort));
  await cliAsync(fromPort, 'CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', idOf(toPort));
  let moved = 0;
  for (;;) {
    const keys = (await cliAsync(fromPort, 'CLUSTER', 'GETKEYSINSLOT', String(slot), String(options.keysPerStep ?? 1))).split('\n').filter((key) => key !== '');
    if (keys.length === 0) break;
    const reply = await cliAsync(fromPort, 'MIGRATE', '127.0.0.1', String(toPort), '', '0', '5000', 'KEYS', ...keys);
    if (!/OK|NOKEY/.test(reply)) throw new Error(`MIGRATE of ${keys.join(' ')} failed: ${reply}`);
    moved += keys.length;
    await pause();
  }
  await pause();
  // The new owner first, then the old one, then every other master, as redis-cli does.
  const masters = nodes.filter((node) => node.flags.includes('master') && !node.flags.some((flag) => flag.startsWith('fail')));
  const order = [toPort, fromPort, ...masters.map((node) => node.port).filter((port) => port !== toPort && port !== fromPort)];
  for (const port of order) await cliAsync(port, 'CLUSTER', 'SETSLOT', String(slot), 'NODE', idOf(toPort));
  return moved;
}

/** One decision of a load run. */
export interface LoadRecord {
  readonly start: number;
  readonly end: number;
  readonly ok: boolean;
  readonly error?: string;
  readonly allowed?: boolean;
}

export interface Load {
  readonly records: readonly LoadRecord[];
  /** Stops issuing calls and waits for those in flight. */
  stop(): Promise<LoadRecord[]>;
}

/**
 * Calls `decide` every `intervalMs` without waiting for the previous call (as independent requests
 * would), each bounded by `timeoutMs` (a call that hangs past it is recorded as an error).
 */
export function startLoad(decide: () => Promise<{ allowed: boolean } | readonly { allowed: boolean }[]>, intervalMs = 5, timeoutMs = 3_000): Load {
  const records: LoadRecord[] = [];
  const inFlight = new Set<Promise<void>>();
  const one = async (): Promise<void> => {
    const start = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const result = await Promise.race([decide(), timeout]);
      const allowed = Array.isArray(result) ? result.every((decision) => decision.allowed) : (result as { allowed: boolean }).allowed;
      records.push({ start, end: Date.now(), ok: true, allowed });
    } catch (error) {
      records.push({ start, end: Date.now(), ok: false, error: error instanceof Error ? error.message : String(error) });
    } finally {
      clearTimeout(timer);
    }
  };
  const interval = setInterval(() => {
    const call = one();
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  }, intervalMs);
  return {
    records,
    async stop() {
      clearInterval(interval);
      await Promise.all([...inFlight]);
      return [...records].sort((a, b) => a.start - b.start);
    },
  };
}

/** How a load run went around a fault at `faultAt` (ms since the epoch). */
export interface FaultReport {
  readonly calls: number;
  /** Failed calls that ended before the fault: should be none. */
  readonly errorsBefore: number;
  /** Failed calls from the fault until the recovery: the first success started after every failed call. */
  readonly errorsInWindow: number;
  /** Failed calls started after that first success answered: should be none. */
  readonly errorsAfter: number;
  /** From the fault to the end of that first success, in ms (undefined: never recovered). */
  readonly windowMs: number | undefined;
  /** From the fault to the end of the last failed call, in ms (undefined: none failed). */
  readonly lastErrorMs: number | undefined;
  /** The distinct error messages, for the test's log. */
  readonly messages: readonly string[];
}

export function faultReport(records: readonly LoadRecord[], faultAt: number): FaultReport {
  // Recovered: the first call to succeed that started after the fault and after every failed call
  // (a call the dying node still answered, or a stray success mid-failover, is not a recovery).
  const errors = records.filter((record) => !record.ok);
  const lastFailedStart = Math.max(faultAt, ...errors.map((record) => record.start));
  const recovered = records.filter((record) => record.ok && record.start >= lastFailedStart).sort((a, b) => a.end - b.end)[0];
  return {
    calls: records.length,
    errorsBefore: errors.filter((record) => record.end < faultAt).length,
    errorsInWindow: errors.filter((record) => record.end >= faultAt && (recovered === undefined || record.start <= recovered.end)).length,
    errorsAfter: recovered === undefined ? 0 : errors.filter((record) => record.start > recovered.end).length,
    windowMs: recovered === undefined ? undefined : recovered.end - faultAt,
    lastErrorMs: errors.length === 0 ? undefined : Math.max(...errors.map((record) => record.end)) - faultAt,
    messages: [...new Set(errors.map((record) => record.error!.replace(/\d+/g, 'N')))],
  };
}
