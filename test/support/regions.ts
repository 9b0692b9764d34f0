/**
 * Two regions for a test file: two redis-servers (one per region) and, between them, a proxy each
 * way that delays every byte by `delayMs` (the inter-region link). Things a test opens on them
 * (limiters, replicators) are closed after the file's tests, before the servers stop.
 */
import { afterAll, beforeAll } from 'vitest';
import { startDelayProxy, type DelayProxy } from './delay-proxy.js';
import { useRedisServer, type SingleRedis } from './redis-topologies.js';

export interface RegionPair {
  readonly eu: SingleRedis;
  readonly us: SingleRedis;
  /** The link as seen from eu: eu's replicator reaches us's Redis through this. */
  readonly euToUs: DelayProxy;
  /** The link as seen from us: us's replicator reaches eu's Redis through this. */
  readonly usToEu: DelayProxy;
  /** Closes `closable` after the file's tests; returns it. */
  track<T extends { close(): Promise<void> }>(closable: T): T;
}

export function useRegionPair(delayMs: number): RegionPair {
  const eu = useRedisServer();
  const us = useRedisServer();
  let euToUs: DelayProxy | undefined;
  let usToEu: DelayProxy | undefined;
  const open: { close(): Promise<void> }[] = [];
  beforeAll(async () => {
    [euToUs, usToEu] = await Promise.all([startDelayProxy(us.port, delayMs), startDelayProxy(eu.port, delayMs)]);
  });
  // Registered after the servers' hooks, so it runs before they stop.
  afterAll(async () => {
    await Promise.all(open.map((closable) => closable.close()));
    await Promise.all([euToUs?.close(), usToEu?.close()]);
  });
  return {
    eu,
    us,
    get euToUs() {
      return euToUs!;
    },
    get usToEu() {
      return usToEu!;
    },
    track(closable) {
      open.push(closable);
      return closable;
    },
  };
}
