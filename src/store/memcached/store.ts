/**
 * The Memcached store: state spread over memcached servers by consistent hashing (ring.ts), an
 * aligned fixed window counted by `incr`/`add` (window-counter.ts), the other fixed-size states
 * decided by compare-and-set on one item each (cas-lanes.ts), which also carries a penalty's end
 * and the key's reservation records (state-item.ts, records.ts); concurrency slots in one item per
 * key (slots.ts). Memcached has no clock a call can read atomically
 * with the state, so a decision's time is this node's clock (or the call's explicit `now`): nodes
 * whose clocks disagree disagree on window boundaries and refills (docs/memcached.md).
 * What memcached cannot hold is refused with an InvalidOptionError naming where it runs.
 */
import type { Decision } from '../../decision.js';
import { InvalidOptionError, StoreDataError, StoreError, StoreUnavailableError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { sharedStates } from '../shared-states.js';
import type { Store, StoreRequest } from '../types.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../slots.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement } from '../types.js';
import { CasLanes } from './cas-lanes.js';
import { MemcachedConnection, MemcachedReplyError } from './connection.js';
import { memcachedKey, slotsItemName } from './keys.js';
import { reserveOp, settleOp } from './reservations.js';
import { acquireOp, checkSlotLimit, heldIn, releaseOp, slotsCodec } from './slots.js';
import { consumeOp, peekItem, resetOp, stateCodec } from './state-item.js';
import { checkMemcachedOptions, type MemcachedStoreOptions } from './options.js';
import { HashRing } from './ring.js';
import { WindowCounter, countsByIncrement } from './window-counter.js';

export type { MemcachedStoreOptions } from './options.js';

/** Creates a Memcached store. Call `await store.ready()` before the first decision. */
export function memcachedStore(options: MemcachedStoreOptions): MemcachedStore {
  return new MemcachedStore(options);
}

export class MemcachedStore implements Store {
  readonly name = 'memcached';
  /** The servers, `host:port,…`, for messages. */
  readonly address: string;
  readonly deadlineMs: number | undefined;
  private readonly connections: MemcachedConnection[];
  private readonly ring: HashRing<MemcachedConnection>;
  private readonly keyPrefix: string;
  private readonly connectTimeoutMs: number;
  private readonly counter: WindowCounter;
  private readonly lanes: CasLanes;

  constructor(options: MemcachedStoreOptions) {
    const { servers, keyPrefix, deadlineMs, numbers } = checkMemcachedOptions(options);
    this.keyPrefix = keyPrefix;
    this.deadlineMs = deadlineMs;
    this.connectTimeoutMs = numbers.connectTimeoutMs;
    this.connections = servers.map(({ host, port }) => new MemcachedConnection({ host, port, ...numbers }));
    this.address = this.connections.map((connection) => connection.address).join(',');
    this.ring = new HashRing(this.connections.map((connection) => ({ name: connection.address, server: connection })));
    const exhausted = (key: string): StoreError =>
      new StoreError(
        `memcached at ${this.ring.serverOf(key).address}: ${numbers.casAttempts} compare-and-set attempts on ${key} each lost to another node's write; raise casAttempts, or decide a key this hot on Redis`,
      );
    this.counter = new WindowCounter(numbers.casAttempts, exhausted);
    this.lanes = new CasLanes(numbers.casAttempts, exhausted);
  }

  /** Resolves once every server answers; rejects with {@link StoreUnavailableError} naming those that did not within `connectTimeoutMs`. */
  async ready(): Promise<void> {
    const answers = await Promise.all(this.connections.map((connection) => withTimeout(connection.version(), this.connectTimeoutMs).then(() => undefined, (error: unknown) => `${connection.address} (${(error as Error).message})`)));
    const missing = answers.filter((answer) => answer !== undefined);
    if (missing.length > 0) throw new StoreUnavailableError(`memcached not reachable: ${missing.join('; ')}; check that it is running and the address is right`);
  }

  /** How many servers are connected now, of how many (for health reports). */
  health(): { readonly connected: number; readonly servers: number } {
    return { connected: this.connections.filter((connection) => connection.isConnected).length, servers: this.connections.length };
  }

  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    return this.call(key, policy, async (connection, name) => {
      // A packed window count by `incr`, unless the item holds reservations beside it (then by compare-and-set).
      const counted = countsByIncrement(policy) ? await this.counter.consume(connection, name, policy, cost, now ?? Date.now(), now !== undefined) : undefined;
      return counted ?? this.lanes.run(connection, name, stateCodec(policy, now), consumeOp(policy, cost, now));
    });
  }

  peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    return this.call(key, policy, async (connection, name) => {
      const at = now ?? Date.now();
      const counted = countsByIncrement(policy) ? await this.counter.peek(connection, name, policy, cost, at) : undefined;
      return counted ?? peekItem(name, await connection.get(name), policy, cost, at);
    });
  }

  /** Reserve then settle (records.ts): the debit and the reservation's record in one compare-and-set step on the key's state item. */
  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): Promise<ReservedDecision> {
    return this.call(key, policy, (connection, name) => this.lanes.run(connection, name, stateCodec(policy, now), reserveOp(policy, request, now)));
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Promise<Settlement> {
    return this.call(key, policy, (connection, name) => this.lanes.run(connection, name, stateCodec(policy, now), settleOp(policy, request, now)));
  }

  /** Concurrency slots (slots.ts): one compare-and-set step on the key's holders item. */
  async acquireSlot(key: string, request: SlotRequest, now: number | undefined): Promise<SlotAnswer> {
    checkSlotLimit(request);
    const name = slotsItemName(this.keyPrefix, key);
    return this.described(name, () => this.lanes.run(this.ring.serverOf(name), name, slotsCodec, acquireOp(request, now)));
  }

  async releaseSlot(key: string, id: string, now: number | undefined): Promise<SlotRelease> {
    const name = slotsItemName(this.keyPrefix, key);
    return this.described(name, () => this.lanes.run(this.ring.serverOf(name), name, slotsCodec, releaseOp(id, now)));
  }

  heldSlots(keys: readonly string[], now: number | undefined): Promise<number[]> {
    const at = now ?? Date.now();
    return Promise.all(
      keys.map((key) => {
        const name = slotsItemName(this.keyPrefix, key);
        return this.described(name, async () => heldIn(name, await this.ring.serverOf(name).get(name), at));
      }),
    );
  }

  /**
   * Several limits: peeked together, then recorded one by one only if all were admitted. Not
   * atomic: a call on another node can slip in between (docs/memcached.md); a state named twice
   * in one group is refused.
   */
  async consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): Promise<Decision[]> {
    if (requests.length === 1) {
      const { key, policy, cost } = requests[0]!;
      return [await (commit ? this.consume(key, policy, cost, now) : this.peek(key, policy, cost, now))];
    }
    if (sharedStates(requests) !== undefined) throw refused('a group of limits naming one state twice', 'name each state once, or use the memory or Redis store');
    const peeks = await Promise.all(requests.map((request) => this.peek(request.key, request.policy, request.cost, now)));
    if (!commit) return peeks;
    if (peeks.every((decision) => decision.allowed)) return Promise.all(requests.map((request) => this.consume(request.key, request.policy, request.cost, now)));
    // Denied: the admitted report what remains (a look), a denied counted-rejected hit is counted, a denial starts its penalty.
    return Promise.all(
      requests.map((request, index) => {
        if (peeks[index]!.allowed) return this.peek(request.key, request.policy, 0, now);
        return request.policy.countRejected || request.policy.blockMs > 0 ? this.consume(request.key, request.policy, request.cost, now) : peeks[index]!;
      }),
    );
  }

  /** Forgets the state and its block; reservation records in the item are kept (as on Redis, where they are keys of their own). */
  async reset(key: string, policy: CompiledPolicy): Promise<void> {
    await this.call(key, policy, async (connection, name) => {
      const text = await connection.get(name);
      if (text === undefined) return;
      if (!text.includes(';r=')) await connection.delete(name);
      else await this.lanes.run(connection, name, stateCodec(policy, undefined), resetOp());
    });
  }

  resetPrefix(): Promise<number> {
    return Promise.reject(refused('reset by prefix (memcached cannot list its keys)', 'reset each key with limiter.reset, or use the Redis store'));
  }

  async close(): Promise<void> {
    for (const connection of this.connections) connection.close();
  }

  /** Runs `work` on the server of `key`'s state under `policy`, its failures described as the store's. */
  private async call<T>(key: string, policy: CompiledPolicy, work: (connection: MemcachedConnection, name: string) => Promise<T>): Promise<T> {
    const refusal = memcachedRefusal(policy);
    if (refusal !== undefined) throw new InvalidOptionError(refusal);
    const name = memcachedKey(this.keyPrefix, key, policy);
    return this.described(name, () => work(this.ring.serverOf(name), name));
  }

  /** `work` on item `name`, the server's error replies described as the store's. */
  private async described<T>(name: string, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof MemcachedReplyError) {
        if (/non-numeric|CLIENT_ERROR/.test(error.message)) throw new StoreDataError(name, `${error.message}: the key holds a value Tollgate did not write; give Tollgate its own keyPrefix`);
        throw new StoreError(error.message, { cause: error });
      }
      throw error;
    }
  }
}

/**
 * Why the Memcached store cannot decide a limit of this shape, naming the alternative; undefined
 * when it can. The service checks its rules with it at start (rules/load.ts), before any request.
 */
export function memcachedRefusal(limit: { readonly algorithm: string; readonly share?: unknown; readonly syncIntervalMs?: number }): string | undefined {
  if (limit.algorithm === 'sliding-log') return refused('the sliding-log algorithm (its log outgrows a memcached item)', "use sliding-window with precision (e.g. { algorithm: 'sliding-window', precision: 10 }), or the Redis store").message;
  if (limit.share !== undefined) return refused('fair shares (share)', 'use the memory or Redis store for a policy with share').message;
  if (limit.syncIntervalMs !== undefined) return refused('local-first (sync_interval_ms: window counts synced by one atomic add)', 'use lease_size, which works on memcached, or the Redis store').message;
  return undefined;
}

/** The refusal of what the Memcached store cannot offer, naming where it runs. */
export function refused(what: string, instead: string): InvalidOptionError {
  return new InvalidOptionError(`the memcached store does not support ${what}: ${instead}`);
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
