/**
 * Local-first mode: a node decides a key's requests in-process, on its view of the shared window
 * counter, and syncs with the store every `syncIntervalMs`. A sync pushes the units the node
 * admitted since the last one (added to the shared counter in one store call, whatever the limit:
 * they are admitted already) and pulls the counter as every node has left it. A key with a fresh
 * view costs no store round trip on the decision path.
 *
 * The price is over-admission: a node does not see what the others admitted since its last sync,
 * so N nodes admitting r units/s each can pass the limit by about (N − 1) × r × (2 × syncIntervalMs +
 * one store round trip) per window (docs/scaling.md derives and measures it). A key the node has
 * no fresh view of — new to it, or not synced for 3 intervals (a store that stopped answering) —
 * is decided by the store, exactly and through the failure modes, while a sync fetches its view
 * (the units it admitted and has not sent go to the store first, in the same store call).
 *
 * Window counters only (fixed-window, sliding-window): a count is a sum of increments, so the
 * nodes' pushes add up whatever order they arrive in. A push that failed is sent again with the
 * next one: a push that timed out but reached the store is then counted twice (fewer admitted,
 * never more).
 */
import { addToWindowState, countsInWindows, describeState, windowAlgorithm } from '../algorithms/window-add.js';
import type { Decision } from '../decision.js';
import { InvalidOptionError } from '../errors.js';
import type { CompiledPolicy } from '../policy.js';
import type { MaybePromise, WindowCounts } from '../store/types.js';
import { PENALTY_DECIDED_LOCALLY, SHARE_DECIDED_LOCALLY, type DecideMode, type LimitOptions } from './checks.js';
import { BookLayer, type DecisionLayer, type WindowAdd, type WindowSyncAnswer } from './layer.js';

/**
 * How views reach the store: the syncs of one tick in one call, answered in order, each with its
 * counts or the error that key alone met (a store outage fails the whole call instead).
 */
export type WindowSync = (adds: readonly WindowAdd[]) => MaybePromise<readonly WindowSyncAnswer[]>;

/** A sync on its way: what it pushed, so a failure can push it again. */
interface Sending extends WindowAdd {
  readonly view: View;
  readonly seq: number;
  readonly window: number;
  /** This process's clock when it went: the store's time is taken halfway to the answer. */
  readonly sentClock: number;
  /** Told when the sync has settled (a store decision waits for the sync sent with it). */
  readonly done: (() => void) | undefined;
}

export interface LocalFirstStats {
  /** Decisions made on a view, without a store call. */
  readonly local: number;
  /** Syncs sent, those that failed, and those not answered yet (sent = answered + failed + out). */
  readonly syncs: number;
  readonly syncFailures: number;
  readonly syncsOut: number;
  /** Keys with a view. */
  readonly views: number;
}

/** A view older than this many intervals is not decided on (the store is not answering). */
const STALE_INTERVALS = 3;
/** Most views held; the oldest go first (their unsent units are pushed). */
const MAX_VIEWS = 100_000;
const COUNT = 0;
const START = 1;

interface View {
  readonly id: string;
  readonly key: string;
  readonly policy: CompiledPolicy;
  readonly syncMs: number;
  /** Decided with an explicit `now` (tests, replays): syncs carry that time, not the store's. */
  readonly explicit: boolean;
  /** The store's counts at the last answered sync, plus what this node recorded since. */
  readonly state: Float64Array;
  /** Units recorded here and not sent yet: in the window starting at `pendingWindow`, the latest at `pendingAt`. */
  pending: number;
  pendingAt: number;
  pendingWindow: number;
  /** Syncs sent, the latest one whose answer is in the view (an older answer is not applied), and those out. */
  sent: number;
  answered: number;
  out: number;
  /** The sync sent after the last decision the store made: the view is fresh only once it is answered. */
  after: number;
  /** When the last sync was sent, and the time of the counts in the view (decision time). */
  sentAt: number;
  syncedAt: number;
  /** This process's clock at the view's last decision: a quiet view's units are pushed by the timer. */
  touchedAt: number;
}

export class LocalFirstBook {
  private readonly views = new Map<string, View>();
  /** Views holding units not sent yet. */
  private readonly unsent = new Set<View>();
  /** The store's clock minus this process's (whole ms), from the last sync answered in the store's time. */
  private offset = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerMs = Infinity;
  private local = 0;
  private syncs = 0;
  private syncFailures = 0;
  private syncsOut = 0;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** This tick's syncs, sent together once the running code is done (one store call). */
  private batch: Sending[] = [];

  constructor(
    private readonly clock: () => number,
    private readonly sync: WindowSync,
  ) {}

  stats(): LocalFirstStats {
    return { local: this.local, syncs: this.syncs, syncFailures: this.syncFailures, syncsOut: this.syncsOut, views: this.views.size };
  }

  /**
   * The decision on the key's fresh view, recorded in it; undefined when there is none: the caller
   * has the store decide, then calls {@link adopt}.
   */
  decide(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, syncMs: number): Decision | undefined {
    const view = this.views.get(viewId(key, policy));
    if (view === undefined || view.policy !== policy || view.syncMs !== syncMs || view.explicit !== (now !== undefined)) return undefined;
    const at = now ?? this.clock() + this.offset;
    if (view.answered < view.after || at - view.syncedAt > STALE_INTERVALS * syncMs) return undefined;
    const { state } = view;
    // A window ended since the unsent units were recorded: they are sent in their own window.
    if (view.pending > 0 && (at >= view.pendingWindow + policy.windowMs || at < view.pendingWindow)) this.send(view, view.pendingAt);
    const count = state[COUNT]!;
    const start = state[START]!;
    const decision = windowAlgorithm(policy).decide(state, 0, at, cost, policy, true);
    if (state[COUNT] !== count || state[START] !== start) {
      if (view.pending === 0) {
        view.pendingWindow = state[START]!;
        this.unsent.add(view);
      }
      view.pending += cost;
      view.pendingAt = at;
    }
    view.touchedAt = this.clock();
    this.local += 1;
    // One sync out per view: a slow store slows the syncs down instead of piling them up.
    if (at - view.sentAt >= syncMs && view.out === 0) this.send(view, view.explicit ? at : undefined);
    return decision;
  }

  /**
   * Right before the store is asked to decide a request for a key without a fresh view: pushes the
   * units this node admitted and has not sent (a view gone stale while it held some), at once, so
   * the store counts them before it decides (a store call's requests are applied in order). Left
   * out, one node alone would pass its own limit by those units.
   */
  pushUnsent(key: string, policy: CompiledPolicy): void {
    const view = this.views.get(viewId(key, policy));
    // Whatever compiled it (the view of a policy object since replaced, a reload), the view counts in this key's state.
    if (view === undefined) return;
    // Units already taken for the syncs sent at the end of the tick (the quiet-view timer, a window
    // that ended) would reach the store after this decision: they go now, before it.
    if (this.batch.some((sending) => sending.view === view)) this.sendBatch();
    if (view.pending === 0) return;
    this.send(view, view.explicit ? view.pendingAt : undefined, NOTHING);
  }

  /**
   * Right after the store was asked to decide a request for a key without a fresh view (at `now`),
   * (re)starts the view: a sync goes out in the same tick, so a batching store answers both in one
   * call and the sync sees the decision. Resolves once the sync is answered (or failed): the
   * caller answers its request then, so the next one finds the view fresh.
   */
  adopt(key: string, policy: CompiledPolicy, now: number | undefined, syncMs: number): MaybePromise<void> {
    const id = viewId(key, policy);
    let view = this.views.get(id);
    if (view === undefined || view.policy !== policy || view.syncMs !== syncMs || view.explicit !== (now !== undefined)) {
      view = this.create(id, key, policy, now !== undefined, syncMs);
    }
    view.touchedAt = this.clock();
    return new Promise<void>((resolve) => this.send(view, now, resolve));
  }

  /** Sends every unsent unit and waits for the syncs out (before the store closes). */
  async flush(): Promise<void> {
    for (const view of [...this.unsent]) this.send(view, view.explicit ? view.pendingAt : undefined);
    this.sendBatch();
    await Promise.allSettled([...this.inFlight]);
  }

  /** Drops the key's view (a reset: the counts it holds are gone). */
  forget(key: string, policy: CompiledPolicy): void {
    const view = this.views.get(viewId(key, policy));
    if (view === undefined) return;
    this.views.delete(view.id);
    this.unsent.delete(view);
  }

  clear(): void {
    this.views.clear();
    this.unsent.clear();
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private create(id: string, key: string, policy: CompiledPolicy, explicit: boolean, syncMs: number): View {
    const previous = this.views.get(id);
    if (previous !== undefined) this.drop(previous);
    if (this.views.size >= MAX_VIEWS) this.drop(this.views.values().next().value!);
    const view: View = {
      id, key, policy, syncMs, explicit,
      state: new Float64Array(3),
      pending: 0, pendingAt: 0, pendingWindow: 0,
      sent: 0, answered: 0, out: 0, after: 0,
      sentAt: -Infinity, syncedAt: -Infinity, touchedAt: 0,
    };
    this.views.set(id, view);
    this.startTimer(syncMs);
    return view;
  }

  /** Forgets a view, pushing its unsent units first. */
  private drop(view: View): void {
    if (view.pending > 0) this.send(view, view.explicit ? view.pendingAt : undefined);
    this.views.delete(view.id);
  }

  /**
   * Pushes the view's unsent units (0: a pull) at `when` (undefined: the store's time), with the
   * other syncs of this tick; with `done`, a store decision waits for this answer: the sync goes at
   * once and the view is not decided on until it is answered.
   */
  private send(view: View, when: number | undefined, done?: () => void): void {
    const sending: Sending = { view, key: view.key, policy: view.policy, units: view.pending, now: when, seq: ++view.sent, window: view.pendingWindow, sentClock: this.clock(), done };
    view.pending = 0;
    this.unsent.delete(view);
    if (done !== undefined) view.after = sending.seq;
    view.out += 1;
    view.sentAt = when ?? this.clock() + this.offset;
    this.syncs += 1;
    this.syncsOut += 1;
    if (done !== undefined) {
      // In the store's batch of this tick, with the decision it follows.
      this.sendBatch([sending]);
    } else if (this.batch.push(sending) === 1) {
      // The others wait for the end of this turn of the event loop: one store call for them all.
      setImmediate(() => this.sendBatch());
    }
  }

  private sendBatch(batch: Sending[] = this.takeBatch()): void {
    if (batch.length === 0) return;
    let answers: MaybePromise<readonly WindowSyncAnswer[]>;
    try {
      answers = this.sync(batch);
    } catch {
      for (const sending of batch) this.failed(sending);
      return;
    }
    if (!(answers instanceof Promise)) {
      this.settle(batch, answers);
      return;
    }
    const settled = answers.then(
      (list) => this.settle(batch, list),
      () => {
        for (const sending of batch) this.failed(sending);
      },
    );
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
  }

  private takeBatch(): Sending[] {
    const batch = this.batch;
    this.batch = [];
    return batch;
  }

  private settle(batch: readonly Sending[], answers: readonly (WindowCounts | Error)[]): void {
    this.syncsOut -= batch.length;
    batch.forEach((sending, i) => {
      const answer = answers[i]!;
      if (answer instanceof Error) {
        // That key's state is not the store's to add to (another type, unreadable): forget the
        // view, so its next request is decided by the store and meets the error itself.
        sending.view.out -= 1;
        this.forget(sending.key, sending.policy);
        sending.done?.();
      } else {
        this.answered(sending, answer);
      }
    });
  }

  private answered(sending: Sending, counts: WindowCounts): void {
    const { view, seq } = sending;
    view.out -= 1;
    sending.done?.();
    // The store read its clock between sending and answering: halfway is the best guess of when,
    // rounded to a whole ms, as every time in a decision is.
    if (sending.now === undefined) this.offset = Math.round(counts.now - (sending.sentClock + this.clock()) / 2);
    if (seq <= view.answered || this.views.get(view.id) !== view) return;
    view.answered = seq;
    view.state.fill(0);
    view.state.set(counts.state);
    view.syncedAt = counts.now;
    // Units recorded here while the sync was out are not in the store's counts yet: add them back,
    // in the window the store counts in if it is already past theirs (it will add them there).
    if (view.pending > 0) addToWindowState(view.state, 0, Math.max(view.pendingAt, view.state[START]!), view.pending, view.policy);
  }

  /** A push that failed goes with the next one (see the module's comment). */
  private failed(sending: Sending): void {
    const { view, units } = sending;
    this.syncFailures += 1;
    this.syncsOut -= 1;
    view.out -= 1;
    sending.done?.();
    if (units === 0 || this.views.get(view.id) !== view) return;
    if (view.pending === 0) {
      view.pendingWindow = sending.window;
      view.pendingAt = sending.now ?? view.pendingAt;
    }
    view.pending += units;
    this.unsent.add(view);
  }

  /** One timer per book, at the shortest interval: it pushes the units of views gone quiet. */
  private startTimer(syncMs: number): void {
    if (syncMs >= this.timerMs) return;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timerMs = syncMs;
    this.timer = setInterval(() => this.pushQuiet(), syncMs);
    this.timer.unref();
  }

  private pushQuiet(): void {
    const quietSince = this.clock();
    for (const view of [...this.unsent]) {
      if (quietSince - view.touchedAt >= view.syncMs && view.out === 0) this.send(view, view.explicit ? view.pendingAt : undefined);
    }
  }
}

/** A `done` that waits for nothing: {@link LocalFirstBook.send} with it goes at once, not at the end of the tick. */
const NOTHING = (): void => undefined;

function viewId(key: string, policy: CompiledPolicy): string {
  return `${policy.stateId}\u0000${key}`;
}

/**
 * Local-first as a layer: a `limit` call with `syncIntervalMs` is decided on this node's fresh view
 * of the key's counter, else by the layers below (exactly, through the failure modes) while a sync
 * fetches a view in the same store call. Syncs go down the stack (the guard runs them). Every
 * other call passes.
 */
export class LocalFirstLayer extends BookLayer<LocalFirstBook, LocalFirstStats> {
  readonly name = 'local-first';

  constructor(
    below: DecisionLayer,
    private readonly clock: () => number,
    /** The store's name, and whether it can sync window counts (`Store.addToWindow`). */
    private readonly store: { readonly name: string; readonly syncs: boolean },
  ) {
    super(below);
  }

  protected makeBook(): LocalFirstBook {
    return new LocalFirstBook(this.clock, (adds) => this.below.sync(adds));
  }

  override one(key: string, policy: CompiledPolicy, cost: number, now: number | undefined, mode: DecideMode, options: LimitOptions | undefined): MaybePromise<Decision> {
    const syncMs = options?.syncIntervalMs;
    if (syncMs === undefined || mode !== 'limit') return this.below.one(key, policy, cost, now, mode, options);
    if (!countsInWindows(policy)) {
      throw new InvalidOptionError(`syncIntervalMs (local-first) needs a fixed-window or sliding-window policy of precision 1, whose counts add up across nodes; for ${describeState(policy)} ${policy.algorithm === 'sliding-window' ? 'use a lease instead' : 'decide exactly (a lease keeps fixed-window and sliding-window caps only)'}`);
    }
    if (policy.blockMs > 0) throw new InvalidOptionError(PENALTY_DECIDED_LOCALLY('local-first', 'syncIntervalMs'));
    if (policy.share !== undefined) throw new InvalidOptionError(SHARE_DECIDED_LOCALLY('local-first', 'syncIntervalMs'));
    if (!this.store.syncs) throw new InvalidOptionError(`syncIntervalMs (local-first) needs a store that can sync window counts; the ${this.store.name} store cannot`);
    const book = this.book;
    const local = book.decide(key, policy, cost, now, syncMs);
    if (local !== undefined) return local;
    book.pushUnsent(key, policy);
    const decided = this.below.one(key, policy, cost, now, mode, options);
    const synced = book.adopt(key, policy, now, syncMs);
    // Answered once the sync sent with it is (the same store call): the next request finds the view.
    return synced instanceof Promise ? synced.then(() => decided) : decided;
  }

  /** A local-first node's unsent units reach the store before it closes. */
  override async close(): Promise<void> {
    const book = this.existingBook;
    book?.close();
    await book?.flush();
    await this.below.close();
  }
}

