/**
 * The Redis store: every decision is decided by one atomic Lua script (scripts/decide.lua), so any
 * number of Tollgate processes share exact counters. Decisions issued in the same tick are sent
 * together: one EVALSHA decides a whole batch (per hash slot on a Cluster), so Redis pays the
 * script overhead once per batch, not once per decision. A decision alone in its call takes its
 * algorithm's lean script (scripts/single.lua). On a Cluster, one call per master decides the
 * groups of all its slots (cross-slot.ts); where it cannot, the per-slot calls of a tick bound for
 * one master go out in one pipeline (pipeline.ts).
 */
import { randomUUID } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import { OPTION_NAMES, TIMEOUT_NUMBERS, checkClock, checkKeyPrefix, checkStoreDeadline, openClient, type RedisStoreOptions } from './connect.js';
import type { Decision } from '../../decision.js';
import { InvalidOptionError, InvalidPolicyError, StoreError, StoreUnavailableError } from '../../errors.js';
import type { CompiledPolicy } from '../../policy.js';
import { sharedStates, writeOnce } from '../shared-states.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement, Store, StoreRequest, WindowCounts } from '../types.js';
import { reserveOn, settleOn, type ScriptRun } from './reservations.js';
import { SHARE_CONSUME, SHARE_PEEK, SHARE_RESET, decideShareOn } from './fair-share.js';
import { escapeKeyPart, groupBySlot, stateKeySuffix } from './keys.js';
import { globEscape, unlinkMatching } from './scan.js';
import { liveNodesKey, markAlive } from './live-nodes.js';
import { OP_ADD, OP_CONSUME, OP_PEEK, OP_RESET } from './protocol.js';
import { ALL_SCRIPTS, type RedisScript } from './lua.js';
import { LeanFunctions } from './functions.js';
import { RedisLedger } from './ledger.js';
import { deliver, scriptCall, type Pending } from './script-call.js';
import { NOT_RUN, byMaster, pipelined, type Call, type Command } from './pipeline.js';
import { CrossSlotCalls } from './cross-slot.js';
import { Tick } from './tick.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from '../slots.js';
import { acquireSlot, heldSlots, releaseSlot, slotsKey } from './slots.js';

export type { RedisStoreOptions } from './connect.js';
import { checkOptions, checkWholeNumbers, type WholeNumberRange } from '../../options.js';

/** The store's whole-number options: its timeouts, and the most requests one script call decides. */
const STORE_NUMBERS = { ...TIMEOUT_NUMBERS, maxBatch: { min: 1, fallback: 64 } } as const satisfies Record<string, WholeNumberRange>;

/** The script's own refusal of its arguments (decide.lua bad_argument, single.lua): nothing was read or written. */
const ARGUMENT_REFUSED = /^(ReplyError: )?ERR tollgate: (argument \d+|single decision arguments)/;
/**
 * A script refused because its slot is half-moved between masters: TRYAGAIN, or ioredis giving up
 * after its redirections (ASK to the new owner, TRYAGAIN there, back to the old one...). Either
 * way no attempt ran the script.
 */
const SLOT_MOVING = /^(ReplyError: )?TRYAGAIN|Too many Cluster redirections\. Last error: (ReplyError: )?(TRYAGAIN|ASK|MOVED)/;

/** Connection errors that mean nothing listens there (or no such host): no use waiting the whole connect timeout. */
const REFUSALS = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);
/** How long refusals go on before `ready()` gives up. */
const REFUSED_GRACE_MS = 1_000;

/** Creates a Redis (or Redis Cluster) store. Call `await store.ready()` before the first decision. */
export function redisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStore(options);
}

export class RedisStore implements Store {
  readonly name = 'redis';
  /** Where the store connects, for error messages. */
  readonly address: string;
  /** The default deadline of decisions on this store (see {@link RedisStoreOptions.deadlineMs}). */
  readonly deadlineMs: number | undefined;
  /** The ioredis connection (shared with rules sync; do not close it yourself). */
  readonly client: Redis | Cluster;
  private readonly ownsClient: boolean;
  private readonly isCluster: boolean;
  private readonly keyPrefix: string;
  private readonly maxBatch: number;
  private readonly connectTimeoutMs: number;
  /** `clock: 'caller'`: decisions without an explicit `now` take this process's clock instead of Redis TIME. */
  private readonly callerClock: boolean;
  /** Lone decisions by FCALL of the lean library (EVALSHA of the lean scripts if Redis refuses it). */
  private readonly functions: LeanFunctions;
  private readonly crossSlot: CrossSlotCalls; // a Cluster's call per master and tick (cross-slot.ts)
  /** Requests of this tick, in calls by their explicit `now` ('' = Redis TIME), in the order made (tick.ts). */
  private readonly tick = new Tick();
  private flushScheduled = false;
  /** Script calls sent and not yet answered (a pipeline counts once). */
  private inFlight = 0;
  /**
   * Until the first connection is up (or has failed once), decisions wait for it instead of failing
   * at once: an app that starts serving before `ready()` resolves does not let its first requests
   * through unchecked. Bounded by `connectTimeoutMs`; after that, failures are immediate.
   */
  private firstConnection: Promise<void> | undefined;
  private waitForFirstConnection = true;
  private lastConnectionError: Error | undefined;
  private closed = false;
  /** This store's name among the nodes sharing the Redis (heartbeat). */
  private readonly nodeId = randomUUID();
  /** The usage ledger (ledger.ts): its writes by one script call, its reads in pages. */
  readonly ledger: RedisLedger;

  constructor(options: RedisStoreOptions) {
    checkOptions('redisStore', options, OPTION_NAMES, "{ url: 'redis://127.0.0.1:6379' }");
    const sources = ['url', 'client', 'cluster', 'sentinels'].filter((name) => options[name as keyof RedisStoreOptions] !== undefined);
    if (sources.length !== 1) {
      throw new InvalidOptionError(
        `redisStore: give exactly one of url, client, cluster or sentinels (got ${sources.length === 0 ? 'none' : sources.join(' and ')})`,
      );
    }
    // `?? undefined`: null has always meant the default prefix here.
    this.keyPrefix = checkKeyPrefix('redisStore', options.keyPrefix ?? undefined);
    const { commandTimeoutMs, connectTimeoutMs, maxBatch } = checkWholeNumbers(STORE_NUMBERS, (name) => options[name], (name) => `redisStore: ${name}`);
    this.connectTimeoutMs = connectTimeoutMs;
    this.maxBatch = maxBatch;
    this.deadlineMs = checkStoreDeadline('redisStore', options.deadlineMs);
    this.callerClock = checkClock('redisStore', options.clock) === 'caller';

    const connected = openClient(options, { commandTimeout: commandTimeoutMs, connectTimeout: connectTimeoutMs });
    this.client = connected.client;
    this.ownsClient = connected.owned;
    this.isCluster = connected.client instanceof Cluster;
    this.address = connected.address;
    this.functions = new LeanFunctions(this.client);
    const host = { client: this.client, address: this.address, callerClock: this.callerClock, maxBatch, busy: (delta: number) => void (this.inFlight += delta) };
    this.crossSlot = new CrossSlotCalls({ ...host, bySlot: (calls) => this.dispatch(calls), fail: (timeKey, batch, error) => this.fail(timeKey, batch, error, 0) });
    this.ledger = new RedisLedger(this.client, this.keyPrefix, this.runReservation);
    // Without a listener, a connection error would crash the process; remember it for messages instead.
    this.client.on('error', (error: Error) => {
      this.lastConnectionError = error;
    });
  }

  /**
   * Resolves once connected; rejects with {@link StoreUnavailableError} naming the address if that
   * takes longer than `connectTimeoutMs`, or once every attempt for a second has been refused
   * (nothing listens there: ECONNREFUSED, or no such host).
   */
  async ready(): Promise<void> {
    if (this.client.status !== 'ready') {
      try {
        await this.connected();
      } finally {
        this.waitForFirstConnection = false;
      }
    }
    // Load the scripts and the lean library up front, so the first calls do not each pay a NOSCRIPT round trip.
    const nodes = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
    await Promise.all([this.functions.load(), this.crossSlot.load(), ...nodes.flatMap((node) => ALL_SCRIPTS.map((script) => node.script('LOAD', script.source).catch(() => undefined)))]);
  }

  private connected(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const give = (waited: number): void => {
        settle();
        const cause = this.lastConnectionError;
        reject(
          new StoreUnavailableError(
            `Redis at ${this.address} is not reachable after ${waited} ms${cause ? ` (${cause.message})` : ''}; check that it is running and the address is right`,
            { cause },
          ),
        );
      };
      const started = performance.now();
      const timer = setTimeout(() => give(this.connectTimeoutMs), this.connectTimeoutMs);
      // Nothing listening (or no such host) is an answer, not a slow network: give up once it has
      // been the answer for REFUSED_GRACE_MS (a server starting beside us gets that long), rather
      // than waiting out the whole connect timeout.
      let refusedSince: number | undefined;
      const onError = (error: Error & { code?: string }): void => {
        if (!REFUSALS.has(error.code ?? '')) {
          refusedSince = undefined;
          return;
        }
        const now = performance.now();
        refusedSince ??= now;
        if (now - refusedSince >= REFUSED_GRACE_MS) give(Math.round(now - started));
      };
      const onReady = (): void => {
        settle();
        resolve();
      };
      const settle = (): void => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        this.client.off('error', onError);
      };
      this.client.once('ready', onReady);
      this.client.on('error', onError);
    });
  }

  async consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    if (policy.share !== undefined) return decideShareOn(this.runReservation, this.keyPrefix, key, policy, cost, SHARE_CONSUME, now);
    return (await this.enqueue([this.redisKey(key, policy)], [policy], OP_CONSUME, [cost], now))[0]!;
  }

  async peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    if (policy.share !== undefined) return decideShareOn(this.runReservation, this.keyPrefix, key, policy, cost, SHARE_PEEK, now);
    return (await this.enqueue([this.redisKey(key, policy)], [policy], OP_PEEK, [cost], now))[0]!;
  }

  async addToWindow(key: string, policy: CompiledPolicy, units: number, now: number | undefined): Promise<WindowCounts> {
    return (await this.enqueue<WindowCounts>([this.redisKey(key, policy)], [policy], OP_ADD, [units], now))[0]!;
  }

  async reset(key: string, policy: CompiledPolicy): Promise<void> {
    if (policy.share !== undefined) return void (await decideShareOn(this.runReservation, this.keyPrefix, key, policy, 0, SHARE_RESET, undefined));
    await this.enqueue([this.redisKey(key, policy)], [policy], OP_RESET, [1], undefined);
  }

  /** Reserve then settle (reservations.ts): one call of scripts/reservation.lua, the key's state and its record in one slot. */
  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): Promise<ReservedDecision> {
    return reserveOn({ run: this.runReservation, address: this.address }, this.redisKey(key, policy), policy, request, now);
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Promise<Settlement> {
    return settleOn({ run: this.runReservation, address: this.address }, this.redisKey(key, policy), policy, request, now);
  }

  private readonly runReservation: ScriptRun = async (script, keys, args) => {
    if (this.waitForFirstConnection && this.client.status !== 'ready') await this.firstConnected();
    return this.evaluate(script, keys, args).catch((error: unknown) => Promise.reject(this.describeFailure(error)));
  };
  /** Concurrency slots: one script call on the key's sorted set of holders (slots.ts). */
  async acquireSlot(key: string, request: SlotRequest, now: number | undefined): Promise<SlotAnswer> {
    return this.onSlots(() => acquireSlot(this.client, slotsKey(this.keyPrefix, key), request, now));
  }

  async releaseSlot(key: string, id: string, now: number | undefined): Promise<SlotRelease> {
    return this.onSlots(() => releaseSlot(this.client, slotsKey(this.keyPrefix, key), id, now));
  }

  async heldSlots(keys: readonly string[], now: number | undefined): Promise<number[]> {
    // One script call per key (each key's set is in its own Cluster slot), all sent at once.
    return this.onSlots(() => Promise.all(keys.map((key) => heldSlots(this.client, slotsKey(this.keyPrefix, key), now))));
  }

  /** A slot call after the first connection (as decisions wait for it), its failure described as a decision's. */
  private async onSlots<T>(call: () => Promise<T>): Promise<T> {
    if (this.waitForFirstConnection && this.client.status !== 'ready') await this.firstConnected();
    try {
      return await call();
    } catch (error) {
      throw this.describeFailure(error);
    }
  }

  /** Marks this store object alive among the nodes sharing this Redis (live-nodes.ts); resolves to how many are. */
  async heartbeat(ttlMs: number): Promise<number> {
    try {
      return await markAlive(this.client, liveNodesKey(this.keyPrefix), this.nodeId, ttlMs);
    } catch (error) {
      throw this.describeFailure(error);
    }
  }

  /**
   * SCANs for this store's keys of callers' keys starting with `prefix` (on a Cluster, on every
   * master) and UNLINKs them in pages: O(keys in Redis), for administration, not for each request.
   */
  async resetPrefix(prefix: string): Promise<number> {
    if (this.waitForFirstConnection && this.client.status !== 'ready') await this.firstConnected();
    const pattern = `${globEscape(`${this.keyPrefix}{${escapeKeyPart(prefix)}`)}*`;
    try {
      return await unlinkMatching(this.client, pattern);
    } catch (error) {
      throw this.describeFailure(error);
    }
  }

  /**
   * All-or-nothing: one script call decides every request and records them only if all are
   * admitted. On a Cluster that needs every key in one hash slot; keys in several slots are
   * decided by peeking all, then recording each (best effort: a concurrent caller can slip in
   * between, so all-or-nothing is then not guaranteed).
   */
  async consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): Promise<Decision[]> {
    const op = commit ? OP_CONSUME : OP_PEEK;
    const keys = requests.map((request) => this.redisKey(request.key, request.policy));
    const policies = requests.map((request) => request.policy);
    const costs = requests.map((request) => request.cost);
    // A shared capacity is decided by its own script (fair-share.ts), as keys in several slots are.
    if (!policies.some((policy) => policy.share !== undefined) && (!this.isCluster || new Set(keys.map((key) => calculateSlot(key))).size <= 1)) {
      return this.enqueue(keys, policies, op, costs, now);
    }
    // Keys in several slots cannot share a script: peek all, then record all only if all passed.
    // As in one script, a state named twice is decided with the largest cost and written once.
    const shared = sharedStates(requests);
    const costOf = (index: number): number => (shared === undefined ? requests[index]!.cost : shared.costs[index]!);
    const peeks = await Promise.all(requests.map((request, index) => this.peek(request.key, request.policy, costOf(index), now)));
    if (!commit) return peeks;
    const mayWrite = writeOnce(shared);
    if (peeks.every((decision) => decision.allowed)) {
      return Promise.all(requests.map((request, index) => (mayWrite(index) ? this.consume(request.key, request.policy, costOf(index), now) : peeks[index]!)));
    }
    // As in one script: the admitted report what actually remains, a denied countRejected attempt is counted, a denial starts its penalty.
    return Promise.all(
      requests.map((request, index) => {
        if (peeks[index]!.allowed) return this.peek(request.key, request.policy, 0, now);
        return (request.policy.countRejected || request.policy.blockMs > 0) && mayWrite(index) ? this.consume(request.key, request.policy, costOf(index), now) : peeks[index]!;
      }),
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  /** The Redis key holding `key`'s state under `policy`. */
  redisKey(key: string, policy: CompiledPolicy): string {
    return `${this.keyPrefix}{${escapeKeyPart(key)}${stateKeySuffix(policy)}`;
  }

  private enqueue<T = Decision>(keys: string[], policies: CompiledPolicy[], op: number, costs: number[], now: number | undefined): Promise<T[]> {
    return new Promise<T[]>((resolve, reject) => {
      this.tick.add(now === undefined ? '' : String(now), { keys, policies, op, costs, resolve: resolve as (results: unknown[]) => void, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        // setImmediate, not nextTick: an HTTP server decides each request in its own I/O callback,
        // and nextTick runs after each one, so under load nearly every batch held one decision
        // (87,526 script calls for ~105k requests). The check phase comes after all the I/O of
        // this loop turn: ~45 decisions per call at 100 connections, for a few µs of latency.
        // Nothing in flight (a lone decision, an idle node): sent at the end of this synchronous run
        // (a microtask), so decisions issued together still share a call but a lone one does not
        // wait for the check phase; under load a call is nearly always in flight (bench/redis-store.js).
        if (this.inFlight === 0) queueMicrotask(() => this.flush());
        else setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.flushScheduled = false;
    const calls = this.tick.take();
    if (this.waitForFirstConnection) {
      if (this.client.status === 'ready') {
        this.waitForFirstConnection = false;
      } else {
        this.firstConnected().then(
          () => this.crossSlot.dispatch(calls),
          (error: unknown) => {
            for (const { batch } of calls) for (const pending of batch) pending.reject(error);
          },
        );
        return;
      }
    }
    this.crossSlot.dispatch(calls);
  }

  /** The first connection (waited for once, up to `connectTimeoutMs`). */
  private firstConnected(): Promise<void> {
    this.firstConnection ??= this.connected().finally(() => {
      this.waitForFirstConnection = false;
    });
    return this.firstConnection;
  }

  /** Sends `tick` (a tick's calls, in order) one script call per slot and up to `maxBatch` groups. */
  private dispatch(tick: readonly Call[]): void {
    const calls: Call[] = [];
    for (const { timeKey, batch: queue } of tick) {
      // A script call may only touch keys of one slot; ioredis routes it by its first key.
      for (const group of this.isCluster ? groupBySlot(queue, (pending) => pending.keys[0]!) : [queue]) {
        for (let start = 0; start < group.length; start += this.maxBatch) calls.push({ timeKey, batch: group.slice(start, start + this.maxBatch) });
      }
    }
    if (!this.isCluster) {
      for (const call of calls) void this.send(call.timeKey, call.batch);
      return;
    }
    // The calls bound for one master share one pipeline (pipeline.ts): spread keys make many.
    for (const group of byMaster(this.client as Cluster, calls)) {
      if (group.length === 1) void this.send(group[0]!.timeKey, group[0]!.batch);
      else void this.sendPipelined(group);
    }
  }

  /**
   * The script calls of `calls` (one master's) in one pipeline, each answered or failed on its own
   * as {@link send} does; a call Redis did not run (redirected, not loaded) is made again by `send`.
   */
  private async sendPipelined(calls: Call[]): Promise<void> {
    const sent: Call[] = [];
    const commands: Command[] = [];
    for (const call of calls) {
      try {
        const [script, keys, args, lean] = scriptCall(call.timeKey, call.batch, this.callerClock);
        commands.push({ sha1: script.sha1, fcall: lean === undefined ? undefined : this.functions.nameOf(lean), keys, args });
        sent.push(call);
      } catch (error) {
        for (const pending of call.batch) pending.reject(error);
      }
    }
    let results: [Error | null, unknown][];
    this.inFlight++;
    try {
      results = await pipelined(this.client as Cluster, commands);
    } catch {
      this.inFlight--;
      for (const call of sent) void this.send(call.timeKey, call.batch);
      return;
    }
    this.inFlight--;
    results.forEach(([error, values], index) => {
      const { timeKey, batch } = sent[index]!;
      if (error === null) deliver(batch, values as number[], this.address);
      else if (NOT_RUN.test(String(error))) void this.send(timeKey, batch);
      else this.fail(timeKey, batch, error, 0);
    });
  }

  /** One script call for `batch`. */
  private async send(timeKey: string, batch: Pending[], tryAgains = 0): Promise<void> {
    let call: ReturnType<typeof scriptCall>;
    try {
      call = scriptCall(timeKey, batch, this.callerClock);
    } catch (error) {
      // A calendar window past the dates JavaScript holds (InvalidTimeError): the batch shares its `now`.
      for (const pending of batch) pending.reject(error);
      return;
    }
    const [script, keys, args, lean] = call;
    let values: number[];
    this.inFlight++;
    try {
      values = lean === undefined ? await this.evaluate(script, keys, args) : await this.functions.call(lean, keys, args, () => this.evaluate(script, keys, args));
    } catch (error) {
      this.inFlight--;
      return this.fail(timeKey, batch, error, tryAgains);
    }
    this.inFlight--;
    deliver(batch, values, this.address);
  }

  /** A script call's failure: sent again if the slot was moving, else each caller of `batch` told. */
  private fail(timeKey: string, batch: Pending[], error: unknown, tryAgains: number): void {
    if (this.isCluster && SLOT_MOVING.test(String(error)) && this.tryAgain(timeKey, batch, tryAgains)) return;
    if (ARGUMENT_REFUSED.test(String(error))) return this.refuseArguments(timeKey, batch, error);
    const failure = this.describeFailure(error);
    for (const pending of batch) pending.reject(failure);
  }

  /**
   * TRYAGAIN: the batch's keys are in a slot being moved between masters, some already moved and
   * some not, so Redis refused to run the script (it ran nothing: sending it again is safe). A
   * batch of several callers is split, each caller's group sent on its own (a single key is then
   * redirected with ASK); a group whose own keys are split is sent again every 25 ms, up to 40
   * times (1 s). False when it gives up.
   */
  private tryAgain(timeKey: string, batch: Pending[], tryAgains: number): boolean {
    if (batch.length > 1) {
      for (const pending of batch) void this.send(timeKey, [pending], tryAgains);
      return true;
    }
    if (tryAgains >= 40) return false;
    setTimeout(() => void this.send(timeKey, batch, tryAgains + 1), 25);
    return true;
  }

  /**
   * The script refused an argument: the caller's error (a policy past the engine's ranges that
   * got by compilePolicy), never the store's health, so it is an {@link InvalidPolicyError}, which
   * the guard does not count as an outage. The script refused the whole batch before reading a
   * key; each caller's group is sent again on its own, so only the one at fault is refused.
   */
  private refuseArguments(timeKey: string, batch: Pending[], error: unknown): void {
    if (batch.length > 1) {
      for (const pending of batch) void this.send(timeKey, [pending]);
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    batch[0]!.reject(new InvalidPolicyError('policy', `Redis refused the decision's arguments (${message}); compile policies with compilePolicy, which holds them to the ranges the script accepts`));
  }

  /** EVALSHA, loading the script again if Redis lost it (restart, SCRIPT FLUSH, failover). */
  private async evaluate(script: RedisScript, keys: string[], args: (string | number)[]): Promise<number[]> {
    try {
      return (await this.client.evalsha(script.sha1, keys.length, ...keys, ...args)) as number[];
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      // EVAL runs the script and caches it on that node, so the next EVALSHA there succeeds.
      return (await this.client.eval(script.source, keys.length, ...keys, ...args)) as number[];
    }
  }

  private describeFailure(error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    // Also the replies of a topology change in progress: a failover (CLUSTERDOWN, READONLY, LOADING, MASTERDOWN), a slot on the move.
    if (this.client.status !== 'ready' || /timed out|Stream isn't writeable|Connection is closed|ECONNREFUSED|CLUSTERDOWN|READONLY|LOADING|MASTERDOWN|TRYAGAIN|Too many Cluster redirections/i.test(message)) {
      return new StoreUnavailableError(`Redis at ${this.address} is unavailable: ${message}`, { cause: error });
    }
    return new StoreError(`Redis at ${this.address} failed a rate limit script: ${message}`, { cause: error });
  }
}
