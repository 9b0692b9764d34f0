/**
 * Token leases: instead of one store call per request, a node takes a batch of permits (`lease`
 * units) from the shared counter in one call and admits its next requests from them locally.
 *
 * Never over the algorithm's own cap, for the two algorithms whose count belongs to a window that
 * ends: a permit is spent only while the window (fixed-window) or the bucket of the rolling window
 * (sliding-window: its current fixed window, or one of its `precision` buckets) it was counted in
 * lasts, and it lapses then. Within that span the count the permit came from stands — a fixed
 * window's count only grows, and a sliding window's estimate only falls as its previous window's
 * weight decays — so every request admitted from a permit is one the store admitted at its
 * instant. Unspent permits are not returned. The price is under-admission: while a node holds
 * permits the others cannot use them, at most nodes × (lease − 1) units per window. A node takes
 * one lease at a time per key: calls that find a lease on its way wait for it and spend from it,
 * so no permit taken is lost and a node never holds more than one lease's worth.
 *
 * Refused (InvalidOptionError) elsewhere: a bucket (token-bucket, GCRA) refills while a permit
 * waits, and a sliding log's window moves on, so permits spent later would join requests the store
 * admitted meanwhile, past the burst (10 per second with a lease of 10: 18 at one instant); a leaky
 * bucket's answer is a place in a queue; `countRejected` must see every attempt.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';
import type { MaybePromise } from '../store/types.js';
import type { DecideMode, LimitOptions } from './checks.js';
import { BookLayer, type DecisionLayer } from './layer.js';

interface Lease {
  readonly policy: CompiledPolicy;
  /** Permits left. */
  permits: number;
  /** The store's instant of the lease, and when its permits lapse. */
  readonly from: number;
  readonly until: number;
  /** What the store said remained after the lease was taken; `remaining` adds the permits left. */
  readonly storeRemaining: number;
  readonly limit: number;
  readonly resetAt: number;
  /** The store's clock minus this process's, when the store gave the time. */
  readonly offset: number;
}

/** Most leases held; the oldest go first (their permits lapse). */
const MAX_LEASES = 100_000;

/** When permits taken at `now` lapse: the end of the window, or of the rolling window's bucket, they were counted in. */
export function leaseLapse(policy: CompiledPolicy, decision: Decision): number {
  if (policy.algorithm === 'fixed-window') return decision.resetAt;
  // Sliding window: its buckets are W / precision wide, aligned on the epoch; the bucket holding
  // `now` ends at the first whole ms of the next, ⌈(⌊now × p / W⌋ + 1) × W / p⌉.
  const now = BigInt(decision.now);
  const windowMs = BigInt(policy.windowMs);
  const precision = BigInt(policy.precision);
  const next = ((now * precision) / windowMs + 1n) * windowMs;
  return Number((next + precision - 1n) / precision);
}

export class LeaseBook {
  private readonly leases = new Map<string, Lease>();
  /** Keys with less than a whole lease left, until when a lease could be had again (store time). */
  private readonly short = new Map<string, { readonly until: number; readonly offset: number }>();
  /** Keys with a lease on its way from the store: whether the store answered it (a lease or a refusal). */
  private readonly coming = new Map<string, Promise<boolean>>();
  private spent = 0;
  private taken = 0;

  constructor(private readonly clock: () => number) {}

  /** Permits spent locally, and leases taken from the store. */
  stats(): { readonly spent: number; readonly taken: number; readonly leases: number } {
    return { spent: this.spent, taken: this.taken, leases: this.leases.size };
  }

  /** Admits `cost` from the key's lease, if it holds enough unlapsed permits. */
  spend(key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Decision | undefined {
    const id = leaseId(key, policy);
    const lease = this.leases.get(id);
    if (lease === undefined || lease.policy !== policy) return undefined;
    const at = now ?? this.clock() + lease.offset;
    if (at >= lease.until || at < lease.from) {
      this.leases.delete(id);
      return undefined;
    }
    if (lease.permits < cost) return undefined;
    lease.permits -= cost;
    this.spent += 1;
    return { allowed: true, limit: lease.limit, remaining: lease.storeRemaining + lease.permits, resetAt: lease.resetAt, retryAfter: 0, now: at };
  }

  /**
   * Records a lease of `taken` units the store admitted (`decision`), of which `cost` went to the
   * request that took it; returns that request's answer.
   */
  record(key: string, policy: CompiledPolicy, taken: number, cost: number, decision: Decision, callerNow: number | undefined): Decision {
    const id = leaseId(key, policy);
    const until = leaseLapse(policy, decision);
    // Permits left of the key's last lease (fewer than a request's cost) join the new one while
    // they lapse with it: counted in the same window, so no permit taken is lost to a costly request.
    const earlier = this.leases.get(id);
    const kept = earlier !== undefined && earlier.policy === policy && earlier.until === until ? earlier.permits : 0;
    this.leases.delete(id);
    const permits = taken - cost + kept;
    if (permits <= 0) return decision;
    if (this.leases.size >= MAX_LEASES) this.leases.delete(this.leases.keys().next().value!);
    this.taken += 1;
    this.leases.set(id, {
      policy,
      permits,
      from: decision.now,
      until,
      storeRemaining: decision.remaining,
      limit: decision.limit,
      resetAt: decision.resetAt,
      offset: callerNow === undefined ? decision.now - this.clock() : 0,
    });
    return { ...decision, remaining: decision.remaining + permits };
  }

  /**
   * Notes that the store refused a whole lease for the key (`decision`, for the lease's size):
   * until it could grant one, the key's requests are decided one by one, as without a lease, so
   * a nearly spent key costs no second store call per request.
   */
  refused(key: string, policy: CompiledPolicy, decision: Decision, callerNow: number | undefined): void {
    const id = leaseId(key, policy);
    this.short.delete(id);
    if (this.short.size >= MAX_LEASES) this.short.delete(this.short.keys().next().value!);
    this.short.set(id, { until: decision.now + decision.retryAfter, offset: callerNow === undefined ? decision.now - this.clock() : 0 });
  }

  /** Whether the store refused the key a whole lease that could not be granted yet at `now`. */
  isShort(key: string, policy: CompiledPolicy, now: number | undefined): boolean {
    const id = leaseId(key, policy);
    const entry = this.short.get(id);
    if (entry === undefined) return false;
    if ((now ?? this.clock() + entry.offset) < entry.until) return true;
    this.short.delete(id);
    return false;
  }

  /** The key's lease on its way from the store, if one is: resolves once it is recorded or refused. */
  incoming(key: string, policy: CompiledPolicy): Promise<boolean> | undefined {
    return this.coming.get(leaseId(key, policy));
  }

  /**
   * Notes the key's lease on its way (`leased`, whose answer is recorded by a callback attached
   * before this call): the key's next calls wait for it, told true once the store answered (the
   * lease recorded or refused), false when it could not (a failure mode's answer, an error).
   */
  expect(key: string, policy: CompiledPolicy, leased: Promise<Decision>): void {
    const id = leaseId(key, policy);
    const answered = leased.then(
      (decision) => {
        this.coming.delete(id);
        return decision.reason === undefined;
      },
      () => {
        this.coming.delete(id);
        return false;
      },
    );
    this.coming.set(id, answered);
  }

  /** Drops the key's lease (a reset: its permits came from counts that are gone). */
  forget(key: string, policy: CompiledPolicy): void {
    this.leases.delete(leaseId(key, policy));
    this.short.delete(leaseId(key, policy));
  }

  clear(): void {
    this.leases.clear();
    this.short.clear();
  }
}

function leaseId(key: string, policy: CompiledPolicy): string {
  return `${policy.stateId}\u0000${key}`;
}

/**
 * Leases as a layer: a `limit` call with a `lease` on a leasable policy is answered from the key's
 * lease when it holds enough permits, else by taking a new lease of `lease` units (this request's
 * cost included) from the layers below; when they have less than a whole lease left, this request
 * alone is decided, as without a lease. One lease per key is on its way at a time: a call that
 * finds one waits for it, then is decided again (from its permits, or by the next lease); if the
 * store could not answer it, the waiting calls are decided alone. Every other call passes.
 */
export class LeaseLayer extends BookLayer<LeaseBook, ReturnType<LeaseBook['stats']>> {
  readonly name = 'lease';

  constructor(
    below: DecisionLayer,
    private readonly clock: () => number,
  ) {
    super(below);
  }

  protected makeBook(): LeaseBook {
    return new LeaseBook(this.clock);
  }

  override one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    const lease = options?.lease;
    // Leases on other algorithms were refused by the core (checks.ts checkLeasable).
    if (lease === undefined || mode !== 'limit') return this.below.one(key, policy, cost, now, mode, options);
    const book = this.book;
    const spent = book.spend(key, policy, cost, now);
    if (spent !== undefined) return spent;
    // A key with less than a whole lease left is decided alone until one could be had again.
    if (book.isShort(key, policy, now)) return this.below.one(key, policy, cost, now, mode, options);
    // A second lease taken meanwhile would replace the first: wait for it, then spend from it.
    const incoming = book.incoming(key, policy);
    if (incoming !== undefined) return incoming.then((answered) => (answered ? this.one(key, policy, cost, now, mode, options) : this.below.one(key, policy, cost, now, mode, options)));
    // A lease past the policy's capacity could never be granted: take at most the capacity.
    const take = Math.max(Math.min(lease, policy.capacity), cost);
    const leased = this.below.one(key, policy, take, now, mode, options);
    const settle = (decision: Decision): MaybePromise<Decision> => {
      // A failure mode's answer is no lease: it is returned as it is.
      if (decision.allowed) return decision.reason === undefined ? book.record(key, policy, take, cost, decision, now) : decision;
      if (take === cost || decision.reason !== undefined) return decision;
      book.refused(key, policy, decision, now);
      return this.below.one(key, policy, cost, now, mode, options);
    };
    if (!(leased instanceof Promise)) return settle(leased);
    // Recorded (or refused) first, then the calls that waited for it are decided.
    const answer = leased.then(settle);
    book.expect(key, policy, leased);
    return answer;
  }
}
