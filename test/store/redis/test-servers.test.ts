/**
 * The redis-server processes the suite starts (test/support/redis.ts): a Cluster node's bus port is
 * reserved with its data port, and a server that cannot start says why (its log) in the failure.
 */
import { createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { CLUSTER_BUS_OFFSET, freePort, startRedis, startRedisOn, type RedisServer } from '../../support/redis.js';

const CLUSTER_FLAGS = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'];
const held: Server[] = [];
const started: RedisServer[] = [];

afterEach(async () => {
  await Promise.all(started.splice(0).map((server) => server.stop()));
  await Promise.all(held.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

function hold(port: number): Promise<void> {
  const server = createServer();
  held.push(server);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
}

describe('test Redis servers', () => {
  it('freePort(true) finds a port whose Cluster bus port is free too', async () => {
    for (let i = 0; i < 5; i++) {
      const port = await freePort(true);
      await hold(port + CLUSTER_BUS_OFFSET); // would fail with EADDRINUSE
    }
  });

  it('a Cluster node whose bus port is taken fails at once, with the tail of its log', async () => {
    const port = await freePort(true);
    await hold(port + CLUSTER_BUS_OFFSET);
    const started = Date.now();
    await expect(startRedisOn(port, CLUSTER_FLAGS)).rejects.toThrow(/exited .* before answering PING; its log:\n[\s\S]*(Address already in use|Could not create Cluster bus)/);
    expect(Date.now() - started).toBeLessThan(25_000); // not the whole start timeout
  });

  it('keeps a running server\'s log', async () => {
    const server = await startRedis();
    started.push(server);
    expect(server.logTail()).toMatch(/Ready to accept connections/);
  });
});
