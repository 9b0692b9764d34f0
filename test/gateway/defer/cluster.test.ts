/**
 * The deferred queue and its drain worker on a real 3-master Redis Cluster: each queue's keys share
 * one slot (the hash tag), so the enqueue and finish scripts, the status pipeline and the consumer
 * group all work there, for queues that land on different masters.
 */
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeferredQueue, startDrainWorker, upstreamDeliverer } from '../../../src/gateway/defer/index.js';
import { useSharedRedisCluster } from '../../support/redis-topologies.js';
import { eventually, startUpstream } from '../../support/defer-upstream.js';

const cluster = useSharedRedisCluster();
let client: Cluster;

beforeAll(() => {
  client = new Cluster([...cluster.nodes]);
});

afterAll(() => {
  client?.disconnect();
});

describe('on a Redis Cluster', () => {
  it('enqueues with the bound, drains through the consumer group and answers status, for queues on different masters', async () => {
    const upstream = await startUpstream((request) => ({ status: 200, body: `done ${request.path}` }));
    const queue = createDeferredQueue({ redis: client, maxLength: 2 });
    // Slots 865, 9053 and 15419: one in each third of the slot range, so one per master.
    const names = ['alpha', 'delta', 'beta'];
    const slots = await Promise.all(names.map((name) => client.call('CLUSTER', 'KEYSLOT', `tollgate:defer:{${name}}:stream`)));
    expect(new Set(slots.map((slot) => client.slots[Number(slot)]?.[0])).size).toBe(3);
    const tickets: string[] = [];
    for (const name of names) {
      for (let i = 0; i < 3; i++) {
        const result = await queue.enqueue(name, { method: 'POST', path: `/${name}/${i}` });
        if (result.accepted) tickets.push(result.ticket);
        else expect(i).toBe(2);
      }
    }
    expect(tickets).toHaveLength(6);
    const workers = names.map((queueName) => startDrainWorker({ queue, queueName, consumer: 'c', blockMs: 100, admit: () => ({ allowed: true, retryAfterMs: 0 }), deliver: upstreamDeliverer(upstream.url) }));
    try {
      await eventually(async () => (await Promise.all(tickets.map((ticket) => queue.status(ticket)))).every((status) => status.state === 'delivered'), 'all delivered');
      expect(upstream.received.map((request) => request.path).sort()).toEqual(['/alpha/0', '/alpha/1', '/beta/0', '/beta/1', '/delta/0', '/delta/1']);
      const status = await queue.status(tickets[0]!);
      expect(status.state === 'delivered' && status.body.toString()).toBe('done /alpha/0');
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
      await upstream.close();
    }
  });
});
