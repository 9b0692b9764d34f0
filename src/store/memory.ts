/**
 * The embedded in-memory store: exact within one process, O(1) per decision (amortised O(1) for
 * the sliding log), and bounded. State lives in typed arrays indexed by slot; a hash table
 * (key-table.ts) maps (algorithm and window, key) to its slot. At most `maxKeys` slots exist: when full, the
 * state that carries least (of a sample, the least recent on a tie) is evicted, so a flood of fresh
 * keys cannot evict a half-spent counter and hand its caller a new quota. Expired state is reclaimed incrementally (a few slots examined on
 * every new key) and by one periodic sweep per store, never by one timer per key.
 */
import { SlidingLog, decideSlidingLog, slotAlgorithms, type SlotAlgorithm } from '../algorithms/index.js';
import { bucketStateSize, decideSlidingBuckets } from '../algorithms/sliding-window-buckets.js';
import { addToWindowState, countsInWindows, describeState, windowAlgorithm } from '../algorithms/window-add.js';
import { currentTime, recentTime } from '../clock.js';
import type { Decision } from '../decision.js';
import { InvalidOptionError } from '../errors.js';
import { POLICY_RANGES, type CompiledPolicy } from '../policy.js';
import { KeyTable } from './key-table.js';
import { PenaltyBox } from './penalty.js';
import { MemoryShares } from './fair-share-memory.js';
import { RecordArena } from './record-arena.js';
import { sharedStates, writeOnce } from './shared-states.js';
import { StateSpaces } from './state-spaces.js';
import { NONE, RecencyList } from './recency.js';
import { EXPIRES, RECORD, STRIDE, SlotStates, offsetOf } from './slot-states.js';
import type { ReservedDecision, ReserveRequest, SettleRequest, Settlement, Store, StoreRequest, WindowCounts } from './types.js';
import { MemoryReservations } from './reservations-memory.js';
import { replayShift } from './replay.js';
import { checkOptions, checkWholeNumbers } from '../options.js';
import { MemoryLedger } from './ledger-memory.js';
import { SlotTable } from './concurrency-slots.js';
import { MEMORY_STORE_NUMBERS, type MemoryStoreOptions, type MemoryStoreStats } from './memory-options.js';

export { MEMORY_STORE_NUMBERS, type MemoryStoreOptions, type MemoryStoreStats } from './memory-options.js';
import type { SlotAnswer, SlotRelease, SlotRequest } from './slots.js';

const INITIAL_SLOTS = 1024;
/** Slots examined for expiry each time a new key is inserted. */
const SWEEP_STEPS_PER_INSERT = 2;
/** Slots weighed for each eviction: this many of the least recently used, and this many at random. */
const EVICTION_OLDEST = 8;
const EVICTION_RANDOM = 8;
const OPTION_NAMES: ReadonlySet<string> = new Set(['maxKeys', 'sweepIntervalMs', 'maxLedgerKeys']);

/** Creates the embedded in-memory store (the default). */
export function memoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  return new MemoryStore(options);
}

export class MemoryStore implements Store {
  readonly name = 'memory';
  private readonly maxKeys: number;
  /** (state space, key) → slot. */
  private readonly table: KeyTable;
  /** A number per state of which keys are held, and the last policy that stored one. */
  private readonly spaces = new StateSpaces();
  /** Each slot's state and expiry. */
  private readonly states: SlotStates;
  /** Slots from most to least recently used. */
  private readonly recency: RecencyList;
  private readonly logs: (SlidingLog | undefined)[] = [];
  /** Bucket records by width. */
  private readonly arenas: (RecordArena | undefined)[] = [];
  private readonly recordScratch = new Float64Array(POLICY_RANGES.precision.max + 2);
  /** Slots ever used; slots below this are either live or on the free list. */
  private highWater = 0;
  private readonly freeSlots: number[] = [];
  private liveKeys = 0;
  private evictions = 0;
  private expired = 0;
  private sweepHand = 0;
  private readonly scratch = new Float64Array(STRIDE);
  private readonly timer: NodeJS.Timeout | undefined;
  /** Keys serving a penalty (`blockDuration`), beside their state. */
  private readonly penalties: PenaltyBox;
  /** Reserve then settle's open reservations, and concurrency slots (concurrency-slots.ts), each made on first use. */
  private reservations: MemoryReservations | undefined;
  private slotTable: SlotTable | undefined;
  /** Fair shares' groups (fair-share-memory.ts), made on first use. */
  private shares: MemoryShares | undefined;
  /** The usage ledger (ledger-memory.ts). */
  readonly ledger: MemoryLedger;

  constructor(options: MemoryStoreOptions) {
    checkOptions('memoryStore', options, OPTION_NAMES, '{ maxKeys: 100_000 }');
    // `?? undefined`: null has always meant the default here.
    const { maxKeys, sweepIntervalMs, maxLedgerKeys } = checkWholeNumbers(MEMORY_STORE_NUMBERS, (name) => options[name] ?? undefined, (name) => `memoryStore: ${name}`);
    this.maxKeys = maxKeys;
    const slots = Math.min(INITIAL_SLOTS, maxKeys);
    this.states = new SlotStates(slots);
    this.recency = new RecencyList(slots);
    this.table = new KeyTable(slots);
    this.penalties = new PenaltyBox(maxKeys);
    this.ledger = new MemoryLedger(maxLedgerKeys);
    if (sweepIntervalMs > 0) {
      this.timer = setInterval(() => this.prune(), sweepIntervalMs);
      this.timer.unref();
    }
  }

  consume(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Decision {
    return now === undefined ? this.decide(key, policy, cost, currentTime(), true, 0) : this.decide(key, policy, cost, now, true, replayShift(now));
  }

  peek(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Decision {
    return this.decide(key, policy, cost, now ?? currentTime(), false, 0);
  }

  consumeAll(requests: readonly StoreRequest[], now: number | undefined, commit: boolean): Decision[] {
    const at = now ?? currentTime();
    const shift = now === undefined ? 0 : replayShift(now);
    // A state named twice is one counter: decided with the largest cost, written once.
    const shared = sharedStates(requests);
    const costOf = (index: number): number => (shared === undefined ? requests[index]!.cost : shared.costs[index]!);
    // Single-threaded: evaluating, then recording, cannot interleave with another caller.
    const decisions = requests.map((request, index) => this.decide(request.key, request.policy, costOf(index), at, false, shift));
    if (!commit) return decisions;
    const mayWrite = writeOnce(shared);
    if (decisions.every((decision) => decision.allowed)) {
      return requests.map((request, index) => (mayWrite(index) ? this.decide(request.key, request.policy, costOf(index), at, true, shift) : decisions[index]!));
    }
    // Denied: nothing admitted is recorded, so the admitted limits report what actually remains
    // (a look of cost 0); a denied countRejected attempt is still counted.
    return requests.map((request, index) => {
      if (decisions[index]!.allowed) return this.decide(request.key, request.policy, 0, at, false, shift);
      return (request.policy.countRejected || request.policy.blockMs > 0) && mayWrite(index) ? this.decide(request.key, request.policy, costOf(index), at, true, shift) : decisions[index]!;
    });
  }

  addToWindow(key: string, policy: CompiledPolicy, units: number, now: number | undefined): WindowCounts {
    if (!countsInWindows(policy)) throw new InvalidOptionError(`addToWindow adds to window counters (fixed-window, sliding-window of precision 1), not to a ${describeState(policy)} state`);
    const at = now ?? currentTime();
    let slot = this.slotOf(key, policy);
    if (slot < 0) {
      slot = this.insert(key, policy, at, 0);
      this.states.clear(slot);
    } else {
      this.recency.touch(slot);
    }
    const data = this.states.arrayOf(slot);
    const base = offsetOf(slot);
    const expires = addToWindowState(data, base, at, units, policy) + (now === undefined ? 0 : replayShift(now));
    this.setExpiry(slot, Math.max(data[base + EXPIRES]!, expires));
    return { now: at, state: Array.from(data.subarray(base, base + windowAlgorithm(policy).stateSize)) };
  }

  reserve(key: string, policy: CompiledPolicy, request: ReserveRequest, now: number | undefined): ReservedDecision {
    return (this.reservations ??= new MemoryReservations(this, this.maxKeys)).reserve(key, policy, request, now);
  }

  settle(key: string, policy: CompiledPolicy, request: SettleRequest, now: number | undefined): Settlement {
    return (this.reservations ??= new MemoryReservations(this, this.maxKeys)).settle(key, policy, request, now);
  }

  /** A copy of `key`'s state under `policy` for reservations: a slot's, a bucket record, or a log's [newest entry time]. */
  stateOf(key: string, policy: CompiledPolicy): readonly number[] | undefined {
    const slot = this.slotOf(key, policy);
    if (slot < 0) return undefined;
    if (policy.algorithm === 'sliding-log') return [this.logs[slot]!.newestTime()];
    const [data, at] = this.stateAt(slot, policy);
    return Array.from(data.subarray(at, at + (policy.precision > 1 ? bucketStateSize(policy) : EXPIRES)));
  }

  /** Runs `change` on `key`'s state at `now` (a slot's, a bucket record's, or its log; made fresh if none and `create`), then answers a look. */
  changeState(key: string, policy: CompiledPolicy, now: number | undefined, create: boolean, change: (state: Float64Array, at: number, now: number, log?: SlidingLog) => void): Decision {
    const at = now ?? currentTime();
    let slot = this.slotOf(key, policy);
    if (slot < 0 && !create) return this.decide(key, policy, 0, at, false, 0);
    if (slot < 0) {
      slot = this.insert(key, policy, at, 1);
      this.states.clear(slot);
      if (policy.algorithm === 'sliding-log') this.logs[slot] = new SlidingLog(policy.capacity);
      else if (policy.precision > 1) this.setRecord(slot, (this.arenas[bucketStateSize(policy)] ??= new RecordArena(bucketStateSize(policy))).allocate());
    }
    const [data, offset] = this.stateAt(slot, policy);
    change(data, offset, at, this.logs[slot]);
    const look = this.decide(key, policy, 0, at, false, 0);
    this.setExpiry(slot, look.resetAt + (now === undefined ? 0 : replayShift(now)));
    this.recency.touch(slot);
    return look;
  }

  /** Where a live slot's state is: its own doubles, or its record in the arena of its width. */
  private stateAt(slot: number, policy: CompiledPolicy): [Float64Array, number] {
    if (policy.precision > 1) return [this.arenas[bucketStateSize(policy)]!.data, this.recordOf(slot)];
    return [this.states.arrayOf(slot), offsetOf(slot)];
  }

  reset(key: string, policy: CompiledPolicy): void {
    if (policy.share !== undefined) return this.shares?.forget(key, policy);
    const slot = this.slotOf(key, policy);
    if (slot >= 0) this.release(slot);
    this.penalties.forget(key, policy);
  }

  resetPrefix(prefix: string): number {
    this.penalties.forgetPrefix(prefix);
    // Slots of those keys too, as on Redis, where they share the keys' hash tag.
    return this.releaseWhere((slot, key) => key.startsWith(prefix)) + (this.slotTable?.forgetPrefix(prefix) ?? 0);
  }

  acquireSlot(key: string, request: SlotRequest, now: number | undefined): SlotAnswer {
    return (this.slotTable ??= new SlotTable()).acquire(key, request, now ?? currentTime());
  }

  releaseSlot(key: string, id: string, now: number | undefined): SlotRelease {
    return (this.slotTable ??= new SlotTable()).release(key, id, now ?? currentTime());
  }

  heldSlots(keys: readonly string[], now: number | undefined): number[] {
    const at = now ?? currentTime();
    return keys.map((key) => this.slotTable?.held(key, at) ?? 0);
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  /** Counters for metrics and tests. */
  stats(): MemoryStoreStats {
    return { keys: this.liveKeys, maxKeys: this.maxKeys, spaces: this.spaces.size, evictions: this.evictions, expired: this.expired };
  }

  /**
   * Reclaims every key whose state has expired by `now`, a reading of the process clock (default:
   * the clock now). Returns how many were reclaimed. The background sweep calls this; tests may too.
   */
  prune(now: number = Date.now()): number {
    this.penalties.prune(now);
    const reclaimed = this.releaseWhere((slot) => this.states.expiryOf(slot) <= now);
    this.expired += reclaimed;
    return reclaimed;
  }

  /** Frees every live slot for which `condition` holds; returns how many. */
  private releaseWhere(condition: (slot: number, key: string) => boolean): number {
    let released = 0;
    for (let slot = 0; slot < this.highWater; slot++) {
      const key = this.table.keyOf(slot);
      if (key !== undefined && condition(slot, key)) {
        this.release(slot);
        released += 1;
      }
    }
    return released;
  }

  /** The slot holding `key` under `policy`'s state, or -1. */
  private slotOf(key: string, policy: CompiledPolicy): number {
    const space = this.spaces.find(policy);
    return space < 0 ? -1 : this.table.find(space, key);
  }

  /**
   * `shift` turns the decision's `resetAt` into the process-clock instant its key may be reclaimed
   * ({@link replayShift}; 0 on the store's own clock).
   */
  private decide(key: string, policy: CompiledPolicy, cost: number, now: number, commit: boolean, shift: number): Decision {
    if (policy.share !== undefined) return (this.shares ??= new MemoryShares(this.maxKeys)).decide(key, policy, cost, now, commit, shift);
    if (policy.blockMs === 0) return this.decideState(key, policy, cost, now, commit, shift);
    return this.penalties.decide(key, policy, now, commit, shift, (write) => this.decideState(key, policy, cost, now, write, shift));
  }

  /** What the key's state alone decides (penalties aside). */
  private decideState(key: string, policy: CompiledPolicy, cost: number, now: number, commit: boolean, shift: number): Decision {
    const slot = this.slotOf(key, policy);
    if (policy.algorithm === 'sliding-log') return this.decideLog(key, slot, policy, cost, now, commit, shift);
    if (policy.precision > 1) return this.decideBuckets(key, slot, policy, cost, now, commit, shift);

    const algorithm: SlotAlgorithm = slotAlgorithms[policy.algorithm];
    if (slot >= 0) {
      const data = this.states.arrayOf(slot);
      const at = offsetOf(slot);
      const decision = algorithm.decide(data, at, now, cost, policy, commit);
      if (commit) {
        // setExpiry() inline: a hot key's path.
        const expires = decision.resetAt + shift;
        data[at + EXPIRES] = expires;
        if (expires < this.states.expiryBound) this.states.lowerExpiryBounds(expires);
        this.recency.touch(slot);
      }
      return decision;
    }
    // A new key is decided on a zeroed scratch slot and only stored if something was recorded, so
    // denials (which record nothing) never take memory or push real keys out.
    const scratch = this.scratch;
    // Stores, not fill(0): a builtin call costs more than the four writes on this path (a new key).
    for (let i = 0; i < STRIDE; i++) scratch[i] = 0;
    const decision = algorithm.decide(scratch, 0, now, cost, policy, commit);
    if (commit && decision.allowed) {
      const newSlot = this.insert(key, policy, now, spentShare(decision));
      const data = this.states.arrayOf(newSlot);
      const at = offsetOf(newSlot);
      for (let i = 0; i < STRIDE - 1; i++) data[at + i] = scratch[i]!;
      this.setExpiry(newSlot, decision.resetAt + shift);
    }
    return decision;
  }

  private decideLog(
    key: string,
    slot: number,
    policy: CompiledPolicy,
    cost: number,
    now: number,
    commit: boolean,
    shift: number,
  ): Decision {
    if (slot >= 0) {
      const decision = decideSlidingLog(this.logs[slot]!, now, cost, policy, commit);
      if (commit) {
        this.setExpiry(slot, decision.resetAt + shift);
        this.recency.touch(slot);
      }
      return decision;
    }
    const log = new SlidingLog(policy.capacity);
    const decision = decideSlidingLog(log, now, cost, policy, commit);
    if (commit && log.length > 0) {
      const newSlot = this.insert(key, policy, now, spentShare(decision));
      this.logs[newSlot] = log;
      this.setExpiry(newSlot, decision.resetAt + shift);
    }
    return decision;
  }

  /** A sliding window of precision N > 1: its state is a record in the arena of its width. */
  private decideBuckets(key: string, slot: number, policy: CompiledPolicy, cost: number, now: number, commit: boolean, shift: number): Decision {
    const width = bucketStateSize(policy);
    const arena = (this.arenas[width] ??= new RecordArena(width));
    if (slot >= 0) {
      const decision = decideSlidingBuckets(arena.data, this.recordOf(slot), now, cost, policy, commit);
      if (commit) {
        this.setExpiry(slot, decision.resetAt + shift);
        this.recency.touch(slot);
      }
      return decision;
    }
    // As for slot state: decided on a zeroed scratch record, stored only if something was recorded.
    const scratch = this.recordScratch;
    scratch.fill(0, 0, width);
    const decision = decideSlidingBuckets(scratch, 0, now, cost, policy, commit);
    if (commit && decision.allowed) {
      const newSlot = this.insert(key, policy, now, spentShare(decision));
      const offset = arena.allocate();
      arena.data.set(scratch.subarray(0, width), offset);
      this.setRecord(newSlot, offset);
      this.setExpiry(newSlot, decision.resetAt + shift);
    }
    return decision;
  }

  /**
   * Takes a slot for a new key of `policy`, decided at `now` (reclaiming expired state, or evicting
   * the state that carries least if full); `newcomer` is the share of its limit the new key will
   * hold. Follows the table lookup that missed this key.
   */
  private insert(key: string, policy: CompiledPolicy, now: number, newcomer: number): number {
    // recentTime(), not currentTime(): a call at an explicit `now` must not take the reading that a
    // later decision on the store's clock in the same synchronous run would then share. A decision on
    // the store's clock took that reading already: it is reused (Date.now() costs ~50 ns a new key).
    const clock = recentTime();
    this.sweepSome(clock);
    let slot = this.freeSlots.pop();
    if (slot === undefined) {
      if (this.highWater < this.maxKeys) {
        if (this.highWater === this.recency.capacity) this.grow();
        slot = this.highWater++;
      } else {
        slot = this.evictionVictim(now, clock, newcomer);
        if (this.states.expiryOf(slot) <= clock) this.expired += 1;
        else this.evictions += 1;
        this.release(slot);
        this.freeSlots.pop();
      }
    }
    // After any sweep or eviction above: they may have freed this policy's space with its last key.
    this.table.insert(this.spaces.enter(policy), key, slot);
    this.recency.add(slot);
    this.liveKeys += 1;
    return slot;
  }

  /**
   * The slot to evict from a full store: of {@link EVICTION_OLDEST} least recently used slots and
   * {@link EVICTION_RANDOM} drawn at random, the one whose state carries the smallest share of its
   * limit at `now` (ties: the least recent). A flood of fresh keys then evicts its own keys, not a
   * victim's half-spent counter; the random draws keep the flood's keys in the comparison even
   * when the oldest slots are all others' heavy counters. The search stops at a slot that carries
   * no more than the new key (`newcomer`, its share once recorded): nothing lighter is needed.
   */
  private evictionVictim(now: number, clock: number, newcomer: number): number {
    let best = this.recency.leastRecent;
    let bestCarry = this.carried(best, now, clock);
    for (let slot = this.recency.newerThan(best), seen = 1; slot !== NONE && seen < EVICTION_OLDEST && bestCarry > newcomer; slot = this.recency.newerThan(slot), seen++) {
      const carry = this.carried(slot, now, clock);
      if (carry < bestCarry) {
        best = slot;
        bestCarry = carry;
      }
    }
    for (let draw = 0; draw < EVICTION_RANDOM && bestCarry > newcomer; draw++) {
      const slot = Math.floor(Math.random() * this.highWater);
      const carry = this.carried(slot, now, clock);
      if (carry < bestCarry) {
        best = slot;
        bestCarry = carry;
      }
    }
    return best;
  }

  /**
   * The share of its limit a live slot's state holds at `now`, as a look (cost 0) of the last
   * policy that stored a key in its state space sees it: 0 for state that has expired or is as a
   * fresh key's, 1 for a spent one.
   */
  private carried(slot: number, now: number, clock: number): number {
    if (this.states.expiryOf(slot) <= clock) return 0;
    const policy = this.spaces.policyOf(this.table.spaceOf(slot));
    let look: Decision;
    if (policy.algorithm === 'sliding-log') look = decideSlidingLog(this.logs[slot]!, now, 0, policy, false);
    else if (policy.precision > 1) look = decideSlidingBuckets(this.arenas[bucketStateSize(policy)]!.data, this.recordOf(slot), now, 0, policy, false);
    else look = slotAlgorithms[policy.algorithm].decide(this.states.arrayOf(slot), offsetOf(slot), now, 0, policy, false);
    return spentShare(look);
  }

  /** Frees a live slot: out of the table, out of the LRU list, onto the free list. */
  private release(slot: number): void {
    const space = this.table.spaceOf(slot);
    const policy = this.spaces.policyOf(space);
    if (policy.precision > 1) this.arenas[bucketStateSize(policy)]!.release(this.recordOf(slot));
    this.table.remove(slot);
    this.spaces.leave(space);
    this.logs[slot] = undefined;
    this.recency.unlink(slot);
    this.freeSlots.push(slot);
    this.liveKeys -= 1;
  }

  /**
   * Incremental expiry: examine a few slots per insert so expired keys do not pile up. Judged by
   * the process clock, never by a caller's `now`: a call at a later `now` on one key must not
   * drop another key its own timeline still needs.
   */
  private sweepSome(now: number): void {
    // Until the earliest expiry, there is nothing to find: no slot is read (slot-states.ts).
    if (now < this.states.earliestExpiry) return;
    for (let step = 0; step < SWEEP_STEPS_PER_INSERT && this.highWater > 0; step++) {
      const slot = this.sweepHand;
      if (this.table.keyOf(slot) !== undefined) {
        const expires = this.states.expiryOf(slot);
        if (expires <= now) {
          this.release(slot);
          this.expired += 1;
        } else {
          this.states.sweptPast(expires);
        }
      }
      if (slot + 1 < this.highWater) {
        this.sweepHand = slot + 1;
      } else {
        this.sweepHand = 0;
        this.states.sweepWrapped();
      }
    }
  }

  /** The offset of a live slot's bucket record (a sliding window of precision N > 1) in its arena. */
  private recordOf(slot: number): number {
    return this.states.arrayOf(slot)[offsetOf(slot) + RECORD]!;
  }

  private setRecord(slot: number, offset: number): void {
    this.states.arrayOf(slot)[offsetOf(slot) + RECORD] = offset;
  }

  /** Sets a live slot's expiry, the process-clock instant its state may be reclaimed. */
  private setExpiry(slot: number, expires: number): void {
    this.states.arrayOf(slot)[offsetOf(slot) + EXPIRES] = expires;
    if (expires < this.states.expiryBound) this.states.lowerExpiryBounds(expires);
  }

  private grow(): void {
    const slots = Math.min(this.recency.capacity * 2, this.maxKeys);
    this.states.grow(slots);
    this.recency.grow(slots);
    this.table.growSlots(slots);
  }
}

/** The share of its limit a decision leaves spent: 0 for a fresh key, 1 for a spent one. */
function spentShare(decision: Decision): number {
  return 1 - decision.remaining / decision.limit;
}
