/**
 * The Memcached store against a real memcached: its options, key names, values it did not write,
 * and the features it refuses, each with a typed error naming where the feature runs.
 */
import { connect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError, StoreDataError, createLimiter, memcachedStore, type MemcachedStore, type Policy } from '../../../src/index.js';
import { useMemcached } from '../../support/memcached.js';

const NOW = 1_700_000_000_000;
const WINDOW: Policy = { algorithm: 'fixed-window', limit: 3, window: '1m' };
const BUCKET: Policy = { algorithm: 'token-bucket', limit: 3, window: '1m' };

const memcached = useMemcached();
const stores: MemcachedStore[] = [];
afterAll(async () => {
  await Promise.all(stores.map((store) => store.close()));
});

async function open(): Promise<MemcachedStore> {
  const store = memcachedStore({ servers: memcached().address });
  stores.push(store);
  await store.ready();
  return store;
}

function unique(name: string): string {
  return `${name}:${Math.random().toString(36).slice(2)}`;
}

/** One text-protocol command to the test's memcached; its reply. */
function raw(command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(memcached().port, '127.0.0.1', () => socket.write(command));
    socket.once('data', (data) => {
      socket.destroy();
      resolve(data.toString());
    });
    socket.on('error', reject);
  });
}

describe('memcachedStore options', () => {
  it.each([
    [{}, /servers must be host:port/],
    [{ servers: '' }, /servers must be host:port/],
    [{ servers: 'localhost' }, /host:port,host:port/],
    [{ servers: 'a:1,a:1' }, /names a:1 twice/],
    [{ servers: 'a:70000' }, /ports 1-65535/],
    [{ servers: ['a:1', 7] }, /host:port/],
    [{ servers: 'a:1', keyPrefix: 'has space' }, /keyPrefix must be printable ASCII/],
    [{ servers: 'a:1', casAttempts: 0 }, /casAttempts/],
    [{ servers: 'a:1', commandTimout: 5 }, /commandTimout/],
  ])('refuses %j with an InvalidOptionError saying what to fix', (options, message) => {
    expect(() => memcachedStore(options as never)).toThrow(InvalidOptionError);
    expect(() => memcachedStore(options as never)).toThrow(message);
  });

  it('takes one server, a comma-separated list, or an array', () => {
    expect(memcachedStore({ servers: '127.0.0.1:11211' }).address).toBe('127.0.0.1:11211');
    expect(memcachedStore({ servers: 'a:1, b:2' }).address).toBe('a:1,b:2');
    expect(memcachedStore({ servers: ['a:1', '[::1]:2'] }).address).toBe('a:1,::1:2');
  });
});

describe('memcached keys and values', () => {
  it('a key with spaces, newlines or past 250 bytes is stored under a hash: counted apart from every other key, never a protocol error', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    try {
      const spaced = unique('user 42\r\nset x 0 0 1');
      const long = unique('x'.repeat(900));
      expect(await limiter.limit(spaced, BUCKET, { now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
      expect(await limiter.limit(long, BUCKET, { now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
      expect(await limiter.limit(spaced, BUCKET, { now: NOW })).toMatchObject({ allowed: true, remaining: 1 });
      expect(await limiter.limit(`${long}y`, BUCKET, { now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
    } finally {
      await limiter.close();
    }
  });

  it('a key holding a value Tollgate did not write is refused with ERR_TOLLGATE_STORE_DATA and left as it was', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const key = unique('foreign');
    try {
      for (const [policy, stateId] of [[BUCKET, 'token-bucket:60000'], [WINDOW, 'fixed-window:60000']] as const) {
        expect(await raw(`set tollgate:k:${key}|${stateId} 0 60 5\r\nhello\r\n`)).toBe('STORED\r\n');
        await expect(limiter.limit(key, policy, { now: NOW })).rejects.toBeInstanceOf(StoreDataError);
        expect(await raw(`get tollgate:k:${key}|${stateId}\r\n`)).toContain('hello');
      }
    } finally {
      await limiter.close();
    }
  });

  it('reset forgets the state of one key under one policy', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const key = unique('reset');
    try {
      for (const policy of [WINDOW, BUCKET]) {
        await limiter.limit(key, policy, { now: NOW, cost: 3 });
        expect((await limiter.limit(key, policy, { now: NOW })).allowed).toBe(false);
        await limiter.reset(key, policy);
        expect(await limiter.limit(key, policy, { now: NOW })).toMatchObject({ allowed: true, remaining: 2 });
      }
    } finally {
      await limiter.close();
    }
  });
});

describe('what the memcached store refuses', () => {
  it.each([
    ['the sliding-log algorithm', (l: Limiter) => l.limit('k', { algorithm: 'sliding-log', limit: 5, window: '1m' }), /sliding-log algorithm.*sliding-window with precision/],
    ['fair shares (share)', (l: Limiter) => l.limit('k', { ...WINDOW, share: { group: 'g', weight: 1 } }), /fair shares \(share\).*memory or Redis store/],
    ['reset by prefix', (l: Limiter) => l.resetPrefix('user:'), /reset by prefix.*limiter\.reset, or use the Redis store/],
    ['a group naming one state twice', (l: Limiter) => l.limitAll([{ key: 'k', policy: WINDOW }, { key: 'k', policy: { ...WINDOW, limit: 9 } }]), /one state twice.*memory or Redis store/],
    ['local-first syncs', (l: Limiter) => l.limit('k', WINDOW, { syncIntervalMs: 100 }), /local-first.*the memcached store cannot/],
  ])('%s: an InvalidOptionError naming the alternative', async (_feature, call, message) => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    try {
      const error = await Promise.resolve()
        .then((): Promise<unknown> => call(limiter))
        .then(() => undefined, (thrown: unknown) => thrown);
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as Error).message).toMatch(message);
    } finally {
      await limiter.close();
    }
  });

  it('a lease (the alternative to local-first) takes its permits from memcached in one call', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const key = unique('lease');
    const policy: Policy = { algorithm: 'fixed-window', limit: 10, window: '1h' };
    try {
      const admitted = [];
      for (let i = 0; i < 12; i++) admitted.push((await limiter.limit(key, policy, { lease: 5, now: NOW })).allowed);
      expect(admitted).toEqual([...Array(10).fill(true), false, false]);
      expect((await limiter.look(key, policy, { now: NOW })).remaining).toBe(0);
    } finally {
      await limiter.close();
    }
  });

  it('groups of limits on distinct states are decided: all admitted, or none recorded', async () => {
    const limiter = createLimiter({ store: await open(), deadlineMs: 5_000 });
    const [a, b] = [unique('group-a'), unique('group-b')];
    try {
      expect((await limiter.limitAll([{ key: a, policy: WINDOW }, { key: b, policy: BUCKET, cost: 3 }], { now: NOW })).map((d) => d.allowed)).toEqual([true, true]);
      const denied = await limiter.limitAll([{ key: a, policy: WINDOW }, { key: b, policy: BUCKET }], { now: NOW });
      expect(denied.map((d) => d.allowed)).toEqual([true, false]);
      expect((await limiter.look(a, WINDOW, { now: NOW })).remaining).toBe(2);
    } finally {
      await limiter.close();
    }
  });
});

type Limiter = ReturnType<typeof createLimiter>;
