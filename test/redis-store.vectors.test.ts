/**
 * The same conformance vectors as the memory store, on a real single Redis and a real 3-master
 * Redis Cluster, started by the test on free ports.
 */
import { useRedisTopologies } from './support/redis-topologies.js';
import { describeVectors } from './support/vectors.js';

const redis = useRedisTopologies();

describeVectors('redis', () => redis.open({ url: redis.single.url }));
describeVectors('redis-cluster', () => redis.open({ cluster: redis.cluster.nodes }));
