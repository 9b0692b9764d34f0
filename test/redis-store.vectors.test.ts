/**
 * The same conformance vectors as the memory store, on a real single Redis and a real 3-master
 * Redis Cluster, started by the test on free ports.
 */
import { afterAll, beforeAll } from 'vitest';
import { redisStore, type RedisStore } from '../src/index.js';
import { startCluster, startRedis, type RedisCluster, type RedisServer } from './support/redis.js';
import { describeVectors } from './support/vectors.js';

let single: RedisServer;
let cluster: RedisCluster;
const stores: RedisStore[] = [];

beforeAll(async () => {
  [single, cluster] = await Promise.all([startRedis(), startCluster(3)]);
}, 60_000);

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
  await Promise.all([single?.stop(), cluster?.stop()]);
});

async function open(options: Parameters<typeof redisStore>[0]): Promise<RedisStore> {
  const store = redisStore(options);
  stores.push(store);
  await store.ready();
  return store;
}

describeVectors('redis', () => open({ url: single.url }));
describeVectors('redis-cluster', () => open({ cluster: cluster.nodes }));
