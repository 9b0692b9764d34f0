/**
 * For a test file that needs both topologies: a single Redis and a 3-master Cluster started before
 * its tests and stopped after, and `open()` for stores that are closed with them.
 */
import { afterAll, beforeAll } from 'vitest';
import { memoryStore, redisStore, type RedisStore, type RedisStoreOptions, type Store } from '../../src/index.js';
import { startCluster, startRedis, type RedisCluster, type RedisServer } from './redis.js';

export interface RedisTopologies {
  /** Available once the file's tests run. */
  readonly single: RedisServer;
  readonly cluster: RedisCluster;
  /** A connected store, closed after the file's tests. */
  open(options: RedisStoreOptions): Promise<RedisStore>;
}

export function useRedisTopologies(): RedisTopologies {
  let single: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    [single, cluster] = await Promise.all([startRedis(), startCluster(3)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(stores.map((store) => store.close()));
    await Promise.all([single?.stop(), cluster?.stop()]);
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
