/**
 * The Redis a test file runs on, started before its tests and stopped after them: a single Redis
 * (with the stores opened on it, or an ioredis client), a Cluster, or both topologies with `open()`
 * for stores that are closed with them. A test that needs a Redis of its own for one test (to kill,
 * restart or configure it) starts it itself with ./redis.ts.
 *
 * {@link useRedisTopologies} and {@link useSharedRedisCluster} lease their servers from the run's
 * pool (./redis-pool.ts): the file has them alone, emptied, but must not kill, pause, restart or
 * reconfigure them.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { memoryStore, redisStore, type RedisStore, type RedisStoreOptions, type Store } from '../../src/index.js';
import { leasePooledRedis } from './redis-pool.js';
import { startCluster, startRedis, type ClusterOptions, type RedisCluster, type RedisServer } from './redis.js';
import { stopProcess } from './stop-process.js';

export interface RedisTopologies {
  /** Available once the file's tests run. */
  readonly single: RedisServer;
  readonly cluster: RedisCluster;
  /** A connected store, closed after the file's tests. */
  open(options: RedisStoreOptions): Promise<RedisStore>;
}

/**
 * A single Redis and a 3-master Cluster for the file's tests: leased from the run's pool when there
 * is one (shared with other files one after the other, so never killed, paused or reconfigured by
 * a test), else started for the file and stopped after it.
 */
export function useRedisTopologies(): RedisTopologies {
  let single: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  let release: (() => Promise<void>) | undefined;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    const pooled = await leasePooledRedis();
    if (pooled !== undefined) {
      ({ single, cluster } = pooled);
      release = async () => pooled.release();
      return;
    }
    [single, cluster] = await Promise.all([startRedis(), startCluster(3)]);
    release = async () => {
      await Promise.all([single?.stop(), cluster?.stop()]);
    };
  }, 180_000);
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await release?.();
  });
  return {
    get single() {
      return single!;
    },
    get cluster() {
      return cluster!;
    },
    async open(options) {
      const store = redisStore(options);
      stores.push(store);
      await store.ready();
      return store;
    },
  };
}

/** A store to run the same test on: a memory store, or a connection to the single Redis or the Cluster. */
export interface StoreTopology {
  readonly name: string;
  /** A fresh memory store, or a new connection (closed after the file's tests). */
  open(): Promise<Store>;
}

/** The memory store, the single Redis and the Cluster of `redis`, for `describe.each`. */
export function storeTopologies(redis: RedisTopologies): readonly StoreTopology[] {
  return [
    { name: 'memory store', open: async () => memoryStore({ sweepIntervalMs: 0 }) },
    { name: 'single Redis', open: () => redis.open({ url: redis.single.url }) },
    { name: 'Redis Cluster', open: () => redis.open({ cluster: redis.cluster.nodes }) },
  ];
}

/** One Redis for a test file, and the stores its tests open on it (closed after the file's tests). */
export interface SingleRedis extends RedisServer {
  /** Push each store a test opens here: they are closed before the server stops. */
  readonly stores: RedisStore[];
}

/** A redis-server started before the file's tests and stopped after them, usable as a RedisServer. */
export function useRedisServer(): SingleRedis {
  let server: RedisServer | undefined;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    server = await startRedis();
  }, 100_000);
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await server?.stop();
  });
  return {
    stores,
    get port() {
      return server!.port;
    },
    get url() {
      return server!.url;
    },
    get pid() {
      return server!.pid;
    },
    cli: (...args) => server!.cli(...args),
    logTail: () => server!.logTail(),
    restart: () => server!.restart(),
    stop: () => server!.stop(),
  };
}

/** A store connected to `redis` (closed with the file's other stores), ready. */
export async function liveStore(redis: SingleRedis, options: Omit<RedisStoreOptions, 'url'> = {}): Promise<RedisStore> {
  const store = redisStore({ url: redis.url, ...options });
  redis.stores.push(store);
  await store.ready();
  return store;
}

/** Runs `during` while `server` is stopped (SIGSTOP: its connections stay open, nothing answers), then lets it go on. */
export async function whileStalled<T>(server: { readonly pid: number }, during: () => Promise<T>): Promise<T> {
  await stopProcess(server.pid);
  try {
    return await during();
  } finally {
    process.kill(server.pid, 'SIGCONT');
  }
}

/** A redis-server for the file's tests and an ioredis client on it, both closed after them. */
export function useRedisWithClient(): { readonly server: SingleRedis; readonly redis: Redis } {
  const server = useRedisServer();
  let redis: Redis | undefined;
  beforeAll(() => {
    redis = new Redis(server.url);
  });
  afterAll(() => {
    redis?.disconnect();
  });
  return {
    server,
    get redis() {
      return redis!;
    },
  };
}

/**
 * The 3-master Cluster of {@link useRedisTopologies} alone: leased from the run's pool when there is
 * one (never kill, pause or reconfigure it), else started for the file.
 */
export function useSharedRedisCluster(): RedisCluster {
  const topologies = useRedisTopologies();
  return {
    get nodes() {
      return topologies.cluster.nodes;
    },
    get servers() {
      return topologies.cluster.servers;
    },
    stop: () => topologies.cluster.stop(),
  };
}

/** A Redis Cluster (see {@link startCluster}) started before the file's tests and stopped after them. */
export function useRedisCluster(masters = 3, options: ClusterOptions = {}): RedisCluster {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster(masters, options);
  }, 180_000);
  afterAll(async () => {
    await cluster?.stop();
  });
  return {
    get nodes() {
      return cluster!.nodes;
    },
    get servers() {
      return cluster!.servers;
    },
    stop: () => cluster!.stop(),
  };
}
