/**
 * The same conformance vectors as the memory store, on a real single Redis and a real 3-master
 * Redis Cluster, started by the test on free ports; and once more on the single Redis with real
 * time passing between steps, which must not change any answer.
 */
import { useRedisTopologies } from '../../support/redis-topologies.js';
import { describeGroupVectors } from '../../support/group-vectors.js';
import { BLOCK_VECTOR_DIR, describeVectors } from '../../support/vectors.js';
import { describeReservationVectors } from '../../support/reservation-vectors.js';
import { describeShareVectors } from '../../support/share-vectors.js';

const redis = useRedisTopologies();

describeVectors('redis', () => redis.open({ url: redis.single.url }));
describeVectors('redis-cluster', () => redis.open({ cluster: redis.cluster.nodes }));
describeVectors('redis, over-limit cache', () => redis.open({ url: redis.single.url }), 0, { overLimitCache: true });
// A replay slower than real time: 20 ms of real time before every step, longer than many of the
// steps' state lifetimes (1 ms windows, resets due in a few ms of `now`).
describeVectors('redis, replayed slowly', () => redis.open({ url: redis.single.url }), 20);

// Limits decided together, some naming one state twice: on the Cluster the cases with a second key
// take the path of keys in several slots (peeks, then records).
describeGroupVectors('redis', () => redis.open({ url: redis.single.url }));
describeGroupVectors('redis-cluster', () => redis.open({ cluster: redis.cluster.nodes }));

// Penalties (blockDuration): the block beside the state, in the same script as the denial.
describeVectors('redis, blocks', () => redis.open({ url: redis.single.url }), 0, {}, BLOCK_VECTOR_DIR);
describeVectors('redis-cluster, blocks', () => redis.open({ cluster: redis.cluster.nodes }), 0, {}, BLOCK_VECTOR_DIR);
describeVectors('redis, blocks, over-limit cache', () => redis.open({ url: redis.single.url }), 0, { overLimitCache: true }, BLOCK_VECTOR_DIR);
// Reserve then settle: the state and the reservation's record in one slot, on one Redis and a Cluster.
describeReservationVectors('redis', () => redis.open({ url: redis.single.url }));
describeReservationVectors('redis-cluster', () => redis.open({ cluster: redis.cluster.nodes }));
// Fair shares: the group's hash under its own hash tag, on one Redis and a Cluster.
describeShareVectors('redis', () => redis.open({ url: redis.single.url }));
describeShareVectors('redis-cluster', () => redis.open({ cluster: redis.cluster.nodes }));
