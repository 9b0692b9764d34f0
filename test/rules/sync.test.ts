/**
 * Rules pushed through Redis: three node processes share one Redis; a push on one is enforced by
 * all three within 1 s; a broken push is refused everywhere and changes nothing; a node that
 * starts later, or misses a notice, catches up.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { RulesError, createLimiter, memoryStore } from '../../src/index.js';
import { RulesHolder, RulesSync } from '../../src/rules/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { useRedisServer } from '../support/redis-topologies.js';

const NODE = new URL('../support/rules-node.mjs', import.meta.url).pathname;
const rulesWith = (limit: number) => `domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute, requests_per_unit: ${limit} }\n`;

interface Node {
  readonly child: ChildProcessWithoutNullStreams;
  readonly events: Record<string, unknown>[];
  push(yaml: string): void;
}

const server = useRedisServer();
const nodes: Node[] = [];

function startNode(url: string): Promise<Node> {
  const child = spawn(process.execPath, [NODE, url]);
  const events: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => events.push(JSON.parse(line) as Record<string, unknown>));
  const node = { child, events, push: (yaml: string) => child.stdin.write(`${Buffer.from(yaml).toString('base64')}\n`) };
  nodes.push(node);
  return new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      if (events.some((event) => 'started' in event)) {
        clearInterval(timer);
        resolve(node);
      }
    }, 10);
    child.once('exit', (code) => reject(new Error(`node exited with ${code}`)));
  });
}

/** The last limit each node reported. */
const limits = () => nodes.map((node) => [...node.events].reverse().find((event) => 'limit' in event)?.limit);

afterAll(async () => {
  for (const node of nodes) node.child.stdin.end();
  await Promise.all(nodes.map((node) => new Promise((resolve) => (node.child.exitCode !== null ? resolve(null) : node.child.once('exit', resolve)))));
});

describe('rules pushed through Redis', () => {
  it('three processes: a push on one is enforced by all three within 1 s; a broken push changes nothing', async () => {
    await Promise.all([startNode(server.url), startNode(server.url), startNode(server.url)]);
    expect(limits()).toEqual([null, null, null]);

    const pushedAt = Date.now();
    nodes[0]!.push(rulesWith(42));
    await expect.poll(limits, { timeout: 1_000, interval: 10 }).toEqual([42, 42, 42]);
    for (const node of nodes) {
      const applied = node.events.find((event) => event.limit === 42)!;
      expect(Number(applied.at) - pushedAt).toBeLessThan(1_000);
    }

    // A broken push is refused at the source and nothing is stored.
    nodes[1]!.push(rulesWith(42).replace('minute', 'fortnight'));
    await expect.poll(() => nodes[1]!.events.some((event) => 'publishRefused' in event), { timeout: 2_000 }).toBe(true);
    expect(String(nodes[1]!.events.find((event) => 'publishRefused' in event)!.publishRefused)).toMatch(/stdin:4:\d+: .*unit/);

    // Broken rules written straight into Redis (bypassing validation) are refused by every node.
    const admin = new Redis(server.url);
    await admin.hset('tollgate:{rules}:domains', 'api', 'domain: api\ndescriptors: [{ key: user, rate_limit: { unit: minute } }]\n');
    await admin.incr('tollgate:{rules}:version');
    await admin.publish('tollgate:rules', 'x');
    await expect.poll(() => nodes.every((node) => node.events.some((event) => 'refused' in event)), { timeout: 2_000 }).toBe(true);
    expect(limits()).toEqual([42, 42, 42]);

    // A good push after that is applied everywhere again.
    nodes[2]!.push(rulesWith(7));
    await expect.poll(limits, { timeout: 1_000, interval: 10 }).toEqual([7, 7, 7]);
    admin.disconnect();
  }, 30_000);

  it('a node that starts later loads the current version; a missed notice is caught up by the poll', async () => {
    const redis = new Redis(server.url);
    const holder = new RulesHolder();
    const sync = new RulesSync({ redis, holder, pollIntervalMs: 100 });
    try {
      const { version } = await sync.publish(rulesWith(11));
      const lateHolder = new RulesHolder();
      const late = new RulesSync({ redis, holder: lateHolder, pollIntervalMs: 100 });
      await late.start();
      expect(late.status().version).toBe(version);
      expect(lateHolder.current.domainNames()).toEqual(['api']);
      // Change the rules without a notice: the periodic check picks it up.
      await redis.hset('tollgate:{rules}:domains', 'api', rulesWith(12));
      await redis.incr('tollgate:{rules}:version');
      await expect.poll(() => late.status().version, { timeout: 1_000 }).toBe(version + 1);
      await late.close();
    } finally {
      await sync.close();
      redis.disconnect();
    }
  });

  it('publish validates first: an invalid push rejects with a RulesError and stores nothing', async () => {
    const redis = new Redis(server.url);
    const sync = new RulesSync({ redis, holder: new RulesHolder() });
    try {
      const before = await redis.get('tollgate:{rules}:version');
      await expect(sync.publish('domain: api\ndescriptors:\n  - key: ""\n')).rejects.toBeInstanceOf(RulesError);
      expect(await redis.get('tollgate:{rules}:version')).toBe(before);
    } finally {
      await sync.close();
      redis.disconnect();
    }
  });
});

/** Two nodes in this process, each with its own connection, holder and RulesSync. */
async function twoNodes(url: string, pollIntervalMs = 100) {
  const made = [0, 1].map(() => {
    const redis = new Redis(url);
    redis.on('error', () => undefined); // refused connections while a test restarts Redis
    const holder = new RulesHolder();
    const errors: string[] = [];
    const warnings: string[] = [];
    const sync = new RulesSync({
      redis,
      holder,
      pollIntervalMs,
      onError: (error) => errors.push((error as Error).message),
      onWarning: (message) => warnings.push(message),
    });
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: holder });
    return { redis, holder, sync, limiter, errors, warnings };
  });
  await Promise.all(made.map((node) => node.sync.start()));
  const limitOf = async (node: (typeof made)[number]) =>
    (await node.limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] })).statuses[0]!.currentLimit?.requestsPerUnit;
  return {
    nodes: made,
    limits: () => Promise.all(made.map(limitOf)),
    async close() {
      for (const node of made) {
        await node.sync.close();
        node.redis.disconnect();
      }
    },
  };
}

/** Two ways Redis loses the pushed rules. */
const DATA_LOSSES: [string, (redis: RedisServer) => Promise<void>][] = [
  ['FLUSHALL', (redis) => Promise.resolve(void redis.cli('FLUSHALL'))],
  ['a restart without persistence', (redis) => redis.restart()],
];

describe('pushes after Redis loses its data', () => {
  it.each(DATA_LOSSES)('after %s, every later push takes effect on every node', async (_what, reset) => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    try {
      const [a, b] = pair.nodes as [(typeof pair.nodes)[number], (typeof pair.nodes)[number]];
      await a.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      await b.sync.publish(rulesWith(11));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([11, 11]);

      await reset(redis);
      // Redis holds nothing now: the nodes keep the rules they run, and the first to look stores them again and says so.
      await Promise.all(pair.nodes.map((node) => node.sync.sync()));
      expect(await pair.limits()).toEqual([11, 11]);
      expect(pair.nodes.flatMap((node) => node.warnings)).toEqual([expect.stringMatching(/^Redis held no pushed rules .*this node stored again the pushed domains it runs \(api\)/)]);
      for (const [node, limit] of [[a, 20], [b, 21], [a, 22], [b, 23]] as const) {
        await node.sync.publish(rulesWith(limit));
        await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([limit, limit]);
      }
    } finally {
      await pair.close();
      await redis.stop();
    }
  }, 20_000);
});

describe('notices after Redis restarts', () => {
  it('a node subscribes again once reconnected: a push reaches it by its notice (the poll an hour off)', async () => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url, 3_600_000);
    try {
      const a = pair.nodes[0]!;
      await a.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      await redis.restart();
      await Promise.all(pair.nodes.map((node) => node.sync.sync()));
      // Each push is seen by b only through a notice; its subscriber comes back within ioredis's backoff.
      let limit = 20;
      await expect
        .poll(
          async () => {
            await a.sync.publish(rulesWith(++limit));
            await new Promise((resolve) => setTimeout(resolve, 200));
            return (await pair.limits())[1] === limit;
          },
          { timeout: 10_000, interval: 0 },
        )
        .toBe(true);
    } finally {
      await pair.close();
      await redis.stop();
    }
  }, 20_000);
});

describe('a push after Redis lost its data', () => {
  it('stores again the pushed domains the pushing node runs, so none is lost', async () => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    try {
      const [a] = pair.nodes;
      await a!.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      redis.cli('FLUSHALL');
      await a!.sync.publish('domain: other\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: 3 }\n');
      await expect.poll(() => pair.nodes.map((node) => node.holder.current.domainNames()), { timeout: 2_000, interval: 10 }).toEqual([
        ['api', 'other'],
        ['api', 'other'],
      ]);
      expect(await pair.limits()).toEqual([10, 10]);
      expect(redis.cli('HKEYS', 'tollgate:{rules}:domains').split('\n').filter(Boolean).sort()).toEqual(['api', 'other']);
    } finally {
      await pair.close();
      await redis.stop();
    }
  });
});

describe('after Redis lost the pushed rules, the nodes that run them store them again', () => {
  it.each(DATA_LOSSES)('after %s, a node started later has the pushed domain within the poll interval', async (_what, reset) => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    try {
      const [a] = pair.nodes;
      const { version } = await a!.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      await reset(redis);
      // A node started now: Redis holds nothing, so it starts without the domain ...
      const lateRedis = new Redis(redis.url);
      const lateHolder = new RulesHolder();
      const late = new RulesSync({ redis: lateRedis, holder: lateHolder, pollIntervalMs: 100 });
      try {
        await late.start();
        // ... and within a poll interval (100 ms, 2 s allowed on a loaded machine) a running node stored it again.
        await expect.poll(() => lateHolder.current.domainNames(), { timeout: 2_000, interval: 10 }).toEqual(['api']);
        expect(late.status().version).toBe(version);
        expect(redis.cli('GET', 'tollgate:{rules}:version').trim()).toBe(String(version));
        expect(await pair.limits()).toEqual([10, 10]);
        const warnings = pair.nodes.flatMap((node) => node.warnings);
        expect(warnings.length).toBeGreaterThanOrEqual(1);
        for (const warning of warnings) expect(warning).toMatch(/^Redis held no pushed rules .*this node stored again the pushed domains it runs \(api\) at generation \d+/);
      } finally {
        await late.close();
        lateRedis.disconnect();
      }
    } finally {
      await pair.close();
      await redis.stop();
    }
  }, 20_000);

  it('a newer push is never overwritten by an older node restoring what it runs (compare-and-set on the generation)', async () => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    const blocked = (): number => Number(/blocked_clients:(\d+)/.exec(redis.cli('INFO', 'clients'))?.[1]);
    try {
      const [a, b] = pair.nodes as [(typeof pair.nodes)[number], (typeof pair.nodes)[number]];
      await a.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      await pair.close(); // stop the polls: this test orders every write itself
      const [redisA, redisB] = [new Redis(redis.url), new Redis(redis.url)];
      const syncA = new RulesSync({ redis: redisA, holder: a.holder, pollIntervalMs: 60_000, onWarning: () => undefined });
      const syncB = new RulesSync({ redis: redisB, holder: b.holder, pollIntervalMs: 60_000, onWarning: () => undefined });
      try {
        await Promise.all([syncA.sync(), syncB.sync()]);
        redis.cli('FLUSHALL');
        // Writes wait (reads go on), then run in the order they came: b's push first, a's restore after it.
        redis.cli('CLIENT', 'PAUSE', '10000', 'WRITE');
        const push = syncB.publish(rulesWith(20));
        await expect.poll(blocked, { timeout: 2_000, interval: 5 }).toBe(1);
        const restore = syncA.sync(); // read Redis empty: stores its generation again, after the push
        await expect.poll(blocked, { timeout: 2_000, interval: 5 }).toBe(2);
        redis.cli('CLIENT', 'UNPAUSE');
        const { version } = await push;
        await restore;
        await syncA.sync();
        expect(redis.cli('GET', 'tollgate:{rules}:version').trim()).toBe(String(version));
        expect(redis.cli('HGET', 'tollgate:{rules}:domains', 'api').trim()).toBe(rulesWith(20).trim());
        expect([syncA.status().version, syncB.status().version]).toEqual([version, version]);
        expect(await pair.limits()).toEqual([20, 20]);
      } finally {
        redis.cli('CLIENT', 'UNPAUSE');
        await Promise.all([syncA.close(), syncB.close()]);
        redisA.disconnect();
        redisB.disconnect();
      }
    } finally {
      await redis.stop();
    }
  }, 20_000);
});

describe('an invalid document stored in Redis', () => {
  const legacyBroken = 'domain: legacy\ndescriptors:\n  - key: user\n    rate_limit: { unit: minute }\n';

  it('is skipped by every node and named; it never blocks the pushes after it', async () => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    const admin = new Redis(redis.url);
    try {
      const [a, b] = pair.nodes as [(typeof pair.nodes)[number], (typeof pair.nodes)[number]];
      await a.sync.publish(rulesWith(10));
      // Written by hand (or by an older version), bypassing publish's validation.
      // In one transaction: a poll between the two would apply (and report) the documents twice.
      await admin.multi().hset('tollgate:{rules}:domains', 'legacy', legacyBroken, 'ghost', rulesWith(1)).incr('tollgate:{rules}:version').exec();
      await Promise.all(pair.nodes.map((node) => node.sync.sync()));
      const skipped = [
        { domain: 'ghost', error: 'redis:tollgate:{rules}:domains#ghost:1:1: domain: the stored text does not define domain "ghost"; push the domain again' },
        { domain: 'legacy', error: expect.stringMatching(/^redis:tollgate:\{rules\}:domains#legacy:4:\d+: descriptors\[0\]\.rate_limit\.requests_per_unit: missing requests_per_unit/) as unknown },
      ];
      for (const node of pair.nodes) {
        expect(node.sync.status().skipped).toEqual(skipped);
        expect(node.sync.status().lastError).toMatch(/#ghost:1:1: .*\n.*#legacy:4:/);
        expect(node.errors).toHaveLength(2);
        expect(node.holder.current.domainNames()).toEqual(['api']);
      }

      // Later pushes go through, say what every node skips, and take effect everywhere.
      const push = await b.sync.publish(rulesWith(20));
      expect(push.skipped).toEqual(skipped);
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([20, 20]);
      await a.sync.publish(rulesWith(30));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([30, 30]);

      // Pushing the broken domain again, fixed, clears the error on every node.
      await a.sync.publish(legacyBroken.replace('unit: minute', 'unit: minute, requests_per_unit: 2'));
      await admin.hdel('tollgate:{rules}:domains', 'ghost');
      await a.sync.publish(rulesWith(40));
      await expect.poll(() => pair.nodes.map((node) => node.sync.status().lastError), { timeout: 2_000, interval: 10 }).toEqual([undefined, undefined]);
      expect(pair.nodes.map((node) => node.holder.current.domainNames())).toEqual([
        ['api', 'legacy'],
        ['api', 'legacy'],
      ]);
    } finally {
      admin.disconnect();
      await pair.close();
      await redis.stop();
    }
  });

  it('keeps the last good rules of its own domain on a node that had them', async () => {
    const redis = await startRedis();
    const pair = await twoNodes(redis.url);
    const admin = new Redis(redis.url);
    try {
      await pair.nodes[0]!.sync.publish(rulesWith(10));
      await expect.poll(pair.limits, { timeout: 2_000, interval: 10 }).toEqual([10, 10]);
      await admin.hset('tollgate:{rules}:domains', 'api', rulesWith(10).replace('minute', 'fortnight'));
      await admin.incr('tollgate:{rules}:version');
      await Promise.all(pair.nodes.map((node) => node.sync.sync()));
      expect(await pair.limits()).toEqual([10, 10]);
      expect(pair.nodes.map((node) => node.sync.status().skipped.map((skipped) => skipped.domain))).toEqual([['api'], ['api']]);
    } finally {
      admin.disconnect();
      await pair.close();
      await redis.stop();
    }
  });
});
