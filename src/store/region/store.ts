/**
 * The multi-region store: each region decides on its own Redis, counting in G-counters (one field
 * per region per window, summed at decision time) that a replicator (replicate.ts) copies between
 * regions asynchronously. Only counter algorithms can be split that way: fixed-window (aligned
 * windows) and sliding-window. docs/scaling.md, "Multi-region", states the bound this keeps.
 */
import type { Redis } from 'ioredis';
import type { Decision } from '../../decision.js';
import { InvalidPolicyError, StoreDataError, StoreError, StoreUnavailableError } from '../../errors.js';
import { checkOptions, checkWholeNumbers } from '../../options.js';
import type { CompiledPolicy } from '../../policy.js';
import { TIMEOUT_NUMBERS, checkKeyPrefix, checkStoreDeadline } from '../redis/connect.js';
import { escapeKeyPart, stateLayoutOneSuffix } from '../redis/keys.js';
import { ALGORITHM_CODES, OP_CONSUME, OP_PEEK, OP_RESET, REASON_CORRUPT_STATE, REASON_WRONG_TYPE, RESULT_START, RESULT_WIDTH, decodeDecision } from '../redis/protocol.js';
import { globEscape, unlinkMatching } from '../redis/scan.js';
import type { Store, StoreRequest } from '../types.js';
import { REGION_DECIDE_SCRIPT } from './lua.js';
import { checkRegionName, evaluate, openRegionClient, regionKeys, type RegionConnection, type RegionKeys } from './shared.js';

/** Options of {@link regionStore}: the region's name and its Redis (exactly one of `url` or `client`). */
export interface RegionStoreOptions extends RegionConnection {
  /** This region's name, the same in its store and its replicator (e.g. `eu`): 1–32 of A–Z a–z 0–9 _ -. */
  readonly region: string;
  /** Prefix of every key; the same in every region and in the replicators. Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** Deadline of one script call in ms. Default 1,000. */
  readonly commandTimeoutMs?: number;
  /** The limiter's default deadline for decisions on this store, in ms. Default: the limiter's (50 ms). */
  readonly deadlineMs?: number;
  /** Deadline of the first connection in ms, for {@link RegionStore.ready}. Default 5,000. */
  readonly connectTimeoutMs?: number;
}

const OPTION_NAMES: ReadonlySet<string> = new Set(['region', 'url', 'client', 'password', 'username', 'tls', 'keyPrefix', 'commandTimeoutMs', 'deadlineMs', 'connectTimeoutMs', 'cluster', 'sentinels']);

/** Creates the store of one region. Call `await store.ready()` before the first decision. */
export function regionStore(options: RegionStoreOptions): RegionStore {
  return new RegionStore(options);
}

export class RegionStore implements Store {
  readonly name = 'region';
  /** This region's name. */
  readonly region: string;
  /** Where the store connects, for error messages. */
  readonly address: string;
  readonly deadlineMs: number | undefined;
  /** The ioredis connection (do not close it yourself). */
  readonly client: Redis;
  private readonly ownsClient: boolean;
  private readonly keyPrefix: string;
  private readonly keys: RegionKeys;
  private readonly connectTimeoutMs: number;
  private connecting: Promise<void> | undefined;
  private lastConnectionError: Error | undefined;
  private closed = false;

  constructor(options: RegionStoreOptions) {
    checkOptions('regionStore', options, OPTION_NAMES, "{ region: 'eu', url: 'redis://127.0.0.1:6379' }");
    this.region = checkRegionName('regionStore', options.region);
    this.keyPrefix = checkKeyPrefix('regionStore', options.keyPrefix);
    this.keys = regionKeys(this.keyPrefix, this.region);
    const { commandTimeoutMs, connectTimeoutMs } = checkWholeNumbers(TIMEOUT_NUMBERS, (name) => options[name], (name) => `regionStore: ${name}`);
    this.connectTimeoutMs = connectTimeoutMs;
    this.deadlineMs = checkStoreDeadline('regionStore', options.deadlineMs);
    const opened = openRegionClient('regionStore', options, { commandTimeout: commandTimeoutMs, connectTimeout: connectTimeoutMs });
    this.client = opened.client;
    this.ownsClient = opened.owned;
    this.address = opened.address;
    // Without a listener a connection error would crash the process; keep it for messages instead.
    this.client.on('error', (error: Error) => {
      this.lastConnectionError = error;
    });
  }

  /** Resolves once connected (and the script loaded); rejects with {@link StoreUnavailableError} after `connectTimeoutMs`. */
  async ready(): Promise<void> {
    if (this.client.status !== 'ready') await this.firstConnection();
    await this.client.script('LOAD', REGION_DECIDE_SCRIPT.source).catch(() => undefined);
  }

  private firstConnection(): Promise<void> {
    if (this.client.status === 'ready') return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onReady = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.client.off('ready', onReady);
        const cause = this.lastConnectionError;
        const why = cause ? ` (${cause.message})` : '';
        reject(new StoreUnavailableError(`Redis of region ${this.region} at ${this.address} is not reachable after ${this.connectTimeoutMs} ms${why}; check that it is running and the address is right`, { cause }));
      }, this.connectTimeoutMs);
      this.client.once('ready', onReady);
    });
  }

  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    return this.one(key, policy, cost, now, OP_CONSUME);
  }

  peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    return this.one(key, policy, cost, now, OP_PEEK);
  }

  /** Forgets `key`'s counters in this region only (see docs/scaling.md: a reset is not replicated). */
  async reset(key: string, policy: CompiledPolicy): Promise<void> {
    await this.run([{ key, policy, cost: 1 }], undefined, OP_RESET);
  }

  /** All-or-nothing in one script: recorded only if every request is admitted. */
  consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): Promise<Decision[]> {
    return this.run(requests, now, commit ? OP_CONSUME : OP_PEEK);
  }

  /** SCAN + UNLINK of this region's hashes of keys starting with `prefix` (this region only). */
  async resetPrefix(prefix: string): Promise<number> {
    await this.connected();
    try {
      return await unlinkMatching(this.client, `${globEscape(`${this.keyPrefix}{${escapeKeyPart(prefix)}`)}*`);
    } catch (error) {
      throw this.describeFailure(error);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.ownsClient) return;
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect());
    else this.client.disconnect();
  }

  /** The Redis hash holding `key`'s counters under `policy` (the same name in every region). */
  hashKey(key: string, policy: CompiledPolicy): string {
    return `${this.keyPrefix}{${escapeKeyPart(key)}${stateLayoutOneSuffix(policy)}`;
  }

  private async one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, op: number): Promise<Decision> {
    return (await this.run([{ key, policy, cost }], now, op))[0]!;
  }

  /** Until the first connection is up, a call waits for it (up to `connectTimeoutMs`) rather than failing at once. */
  private async connected(): Promise<void> {
    if (this.client.status === 'ready') return;
    this.connecting ??= this.firstConnection();
    await this.connecting;
  }

  private async run(requests: readonly StoreRequest[], now: number | undefined, op: number): Promise<Decision[]> {
    const args: (string | number)[] = [now === undefined ? '' : now, this.region, op];
    const hashes = [this.keys.changes, this.keys.sequence];
    for (const { key, policy, cost } of requests) {
      checkSupported(policy);
      hashes.push(this.hashKey(key, policy));
      args.push(ALGORITHM_CODES[policy.algorithm], policy.windowMs, policy.capacity, policy.nominalCapacity, policy.countRejected ? 1 : 0, cost);
    }
    await this.connected();
    let values: number[];
    try {
      values = (await evaluate(this.client, REGION_DECIDE_SCRIPT, hashes, args)) as number[];
    } catch (error) {
      throw this.describeFailure(error);
    }
    return requests.map((request, index) => {
      const offset = RESULT_START + index * RESULT_WIDTH;
      const reason = values[offset + 5];
      if (reason === REASON_WRONG_TYPE || reason === REASON_CORRUPT_STATE) throw dataError(hashes[index + 2]!, reason);
      return decodeDecision(values, offset, request.policy);
    });
  }

  private describeFailure(error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    if (this.client.status !== 'ready' || /timed out|Stream isn't writeable|Connection is closed|ECONNREFUSED|LOADING|READONLY|MASTERDOWN/i.test(message)) {
      return new StoreUnavailableError(`Redis of region ${this.region} at ${this.address} is unavailable: ${message}`, { cause: error });
    }
    return new StoreError(`Redis of region ${this.region} at ${this.address} failed a rate limit script: ${message}`, { cause: error });
  }
}

/** The algorithms whose state is a sum of per-region counts. */
const SUPPORTED = "fixed-window (aligned windows) and sliding-window";

/** Refuses a policy whose state cannot be split into per-region counts that add up. */
function checkSupported(policy: CompiledPolicy): void {
  if (policy.share !== undefined) {
    throw new InvalidPolicyError('share', 'regionStore keeps no fair shares: a group weighed in one region would not see the tenants of the others; remove share, or use redisStore');
  }
  if (policy.blockMs > 0) {
    throw new InvalidPolicyError('blockDuration', 'regionStore keeps no penalties: a block started in one region would not be seen in the others until replicated; remove blockDuration, or use redisStore');
  }
  if (policy.algorithm === 'sliding-window' && policy.precision > 1) {
    throw new InvalidPolicyError('precision', `regionStore supports ${SUPPORTED} of precision 1: its per-region counters are two windows, not ${policy.precision} buckets; remove precision`);
  }
  if (policy.calendar !== undefined) {
    throw new InvalidPolicyError('window', `regionStore does not take calendar windows ('${policy.calendar.unit}'): its regions' counters are windows of one length; use a window such as '1d' across regions`);
  }
  if (policy.algorithm === 'sliding-window' || (policy.algorithm === 'fixed-window' && !policy.firstHit)) return;
  if (policy.algorithm === 'fixed-window') {
    throw new InvalidPolicyError(
      'windowStart',
      `regionStore supports ${SUPPORTED}: a first-hit window starts at one region's first hit, which the other regions cannot agree on; use windowStart: 'aligned'`,
    );
  }
  const why = policy.algorithm === 'sliding-log' ? "a log of timestamps is not a sum of per-region counts" : "a bucket's level (or GCRA's timestamp) is not a sum of per-region increments: it drains with time, so regions' shares cannot be added";
  throw new InvalidPolicyError('algorithm', `regionStore supports ${SUPPORTED}, got ${policy.algorithm}: ${why}; use fixed-window or sliding-window for limits shared across regions`);
}

function dataError(key: string, reason: number): StoreDataError {
  return new StoreDataError(
    key,
    reason === REASON_WRONG_TYPE
      ? `Redis key ${key} holds a value that is not a region counter hash (a redisStore's key, or another application's?); Tollgate leaves it alone — use another keyPrefix or delete the key`
      : `Redis key ${key} holds counters Tollgate cannot read; it was left unchanged — delete the key to start it fresh`,
  );
}
