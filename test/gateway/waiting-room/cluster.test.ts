/**
 * The waiting room on a Redis Cluster, on the store's own time (Redis `TIME`: no clock given): one
 * room's keys share a hash tag, so its one script runs in one slot; two nodes keep the bound and the
 * order as on one Redis.
 */
import { describe, expect, it } from 'vitest';
import { startTestGateway, startUpstream } from '../../support/gateway.js';
import { useRedisCluster } from '../../support/redis-topologies.js';
import { Jar, positionOf, roomConfig, roomRoute, useRoomSecret } from '../../support/waiting-room.js';

const RULES = 'domain: wr\ndescriptors: []\n';

describe('waiting room on a Redis Cluster', () => {
  const cluster = useRedisCluster(3);

  it('keeps the bound and the order across two nodes, all of a room in one slot', { timeout: 60_000 }, async () => {
    useRoomSecret();
    const upstream = await startUpstream();
    const flags = { 'redis-cluster': cluster.nodes.map((node) => `${node.host}:${node.port}`).join(',') };
    const config = roomConfig(upstream.url, roomRoute('/', { room: 'clustered', active_users: 1 }));
    const a = await startTestGateway(config, RULES, { flags });
    const b = await startTestGateway(config, RULES, { flags });
    try {
      const users = [new Jar('u1'), new Jar('u2'), new Jar('u3')];
      expect((await users[0]!.join(a.url('/'))).status).toBe(200);
      expect(positionOf(await users[1]!.join(b.url('/')))).toBe(1);
      expect(positionOf(await users[2]!.join(a.url('/')))).toBe(2);
      expect(positionOf(await users[2]!.get(b.url('/')))).toBe(2);
      expect((await users[0]!.get(b.url('/'))).status).toBe(200);
      const slots = new Set(['queue', 'seen', 'active', 'seq'].map((name) => cluster.servers[0]!.cli('CLUSTER', 'KEYSLOT', `tollgate:wr:{clustered}:${name}`).trim()));
      expect(slots.size).toBe(1);
    } finally {
      await a.close();
      await b.close();
      await upstream.close();
    }
  });
});
