/**
 * For a test file that needs both topologies: a single Redis and a 3-master Cluster started before
 * its tests and stopped after, and `open()` for stores that are closed with them.
 */
import { afterAll, beforeAll } from 'vitest';
import { redisStore, type RedisStore, type RedisStoreOptions } from '../../src/index.js';
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
