/**
 * The usage ledger (docs/quotas.md §3): what each decision of a policy with a `ledger` admitted
 * (and refused, when asked) is added to its key's sums in the period of the decision, through the
 * store, right after the decision — a second store call, never inside the decision's script, so
 * decisions without a ledger pay nothing. The decision's answer waits for the write; if the write
 * fails, the decision stands and that usage is lost, counted in `stats().failed` (never thrown at
 * the caller, who was admitted). A decision the store did not make (a failure mode answered) is
 * not recorded: `stats().unrecorded`. `export` reads a period back in pages.
 */
import { parsePeriodName, periodBounds, periodName, retentionEnd, type LedgerSpec } from '../algorithms/ledger-periods.js';
import { canonicalTimeZone } from '../algorithms/calendar.js';
import { currentTime } from '../clock.js';
import type { Decision } from '../decision.js';
import { InvalidOptionError, StoreUnavailableError, TollgateError } from '../errors.js';
import { checkOptions } from '../options.js';
import type { CompiledPolicy } from '../policy.js';
import type { LedgerStore, LedgerWriteResult } from '../store/ledger.js';
import type { MaybePromise } from '../store/types.js';
import type { StoreLayer } from './store-layer.js';
import { checkNow } from './checks.js';
import { degradedReasonOf } from './failure-modes.js';

/** One row of an export: a key's sums in one period ([periodStart, periodEnd), epoch ms). */
export interface LedgerRow {
  readonly key: string;
  /** The period's name, as asked: `2026-11`. */
  readonly period: string;
  readonly periodStart: number;
  readonly periodEnd: number;
  /** Units admitted (a request of cost 5 counts 5), a retry with the same request id once. */
  readonly admitted: number;
  /** Units refused: 0 unless the policy's ledger has `refused: true`. */
  readonly refused: number;
}

/** Options of {@link LimiterLedger.export}. */
export interface LedgerExportOptions {
  /** `2026` (year), `2026-Q4`, `2026-11` (month), `2026-W48` (ISO week), `2026-11-28` (day). */
  readonly period: string;
  /** The zone of the ledger's periods (default `UTC`). */
  readonly timeZone?: string;
  /** The instant retention is judged at (default the limiter's clock, else now). */
  readonly now?: number;
}

/** What the ledger recorded since the limiter started. */
export interface LedgerStats {
  /** Writes that counted units. */
  readonly counted: number;
  /** Admissions whose request id was billed already: nothing counted. */
  readonly repeated: number;
  /** Writes the store failed (the decision stood; its usage is not in the ledger). */
  readonly failed: number;
  /** Decisions a failure mode answered, not the store: not recorded. */
  readonly unrecorded: number;
  /** Writes the store refused because a period held its most keys (memory store: `maxLedgerKeys`). */
  readonly dropped: number;
}

/** The limiter's ledger: `limiter.ledger`. */
export interface LimiterLedger {
  /**
   * Every key's sums in one period, row by row, read from the store in pages of
   * {@link EXPORT_PAGE} (never the whole period in memory). Bad options throw at once.
   */
  export(options: LedgerExportOptions): AsyncIterable<LedgerRow>;
  stats(): LedgerStats;
}

/** Rows read from the store at a time. */
export const EXPORT_PAGE = 500;
export class LedgerRecorder implements LimiterLedger {
  private counts = { counted: 0, repeated: 0, failed: 0, unrecorded: 0 };
  /** Per ledger, the last period written: its bounds, name and retention end (computed once per period). */
  private readonly retention = new WeakMap<LedgerSpec, { start: number; end: number; name: string; expiresAt: number }>();

  constructor(
    private readonly store: StoreLayer,
    private readonly clock: (() => number) | undefined,
  ) {}

  /** Throws before deciding when the store keeps no ledger. */
  check(): LedgerStore {
    if (this.store.ledger === undefined) throw new InvalidOptionError(`the ${this.store.storeName} store keeps no usage ledger: policies with a ledger run on the memory store and on Redis`);
    return this.store.ledger;
  }

  /** Records `decided` under `policy`'s ledger, then answers it (the same decision). */
  after(decided: MaybePromise<Decision>, key: string, policy: CompiledPolicy, cost: number, requestId: string | undefined): MaybePromise<Decision> {
    if (decided instanceof Promise) return decided.then((decision) => this.after(decision, key, policy, cost, requestId));
    const written = this.write(decided, key, policy.ledger!, cost, requestId);
    if (written === undefined) return decided;
    return written instanceof Promise ? written.then(() => decided) : decided;
  }

  /** Records each decision of a group under its policy's ledger; answers the group. */
  afterAll(decided: MaybePromise<Decision[]>, requests: readonly { key: string; policy: CompiledPolicy; cost: number }[], requestId: string | undefined): MaybePromise<Decision[]> {
    if (decided instanceof Promise) return decided.then((decisions) => this.afterAll(decisions, requests, requestId));
    const admitted = decided.every((decision) => decision.allowed);
    const writes = requests.map((request, i) => (request.policy.ledger === undefined ? undefined : this.write({ ...decided[i]!, allowed: admitted }, request.key, request.policy.ledger, request.cost, requestId)));
    return writes.some((write) => write instanceof Promise) ? Promise.all(writes).then(() => decided) : decided;
  }

  private write(decision: Decision, key: string, spec: LedgerSpec, cost: number, requestId: string | undefined): MaybePromise<void> | undefined {
    if (!decision.allowed && !spec.refused) return undefined;
    if (degradedReasonOf(decision) !== undefined) {
      this.counts.unrecorded++;
      return undefined;
    }
    const { name, expiresAt } = this.periodOf(spec, decision.now);
    const write = { period: name, key, admitted: decision.allowed, cost, id: requestId ?? '', ids: spec.ids, now: decision.now, expiresAt };
    try {
      const result = this.check().record(write);
      if (!(result instanceof Promise)) return this.tally(result);
      return result.then((answer) => this.tally(answer), () => void this.counts.failed++);
    } catch {
      this.counts.failed++;
      return undefined;
    }
  }

  private tally(result: LedgerWriteResult): void {
    if (result === 'counted') this.counts.counted++;
    else if (result === 'repeated') this.counts.repeated++;
  }

  /** The name (`2026-11@UTC`) and retention end of the period holding `now`: computed once per period, then two comparisons. */
  private periodOf(spec: LedgerSpec, now: number): { name: string; expiresAt: number } {
    const last = this.retention.get(spec);
    if (last !== undefined && now >= last.start && now < last.end) return last;
    const period = spec.periods.periodAt(now);
    const current = { start: period.start, end: period.end, name: `${periodName(spec.periods.unit, spec.periods.timeZone, period.start)}@${spec.periods.timeZone}`, expiresAt: retentionEnd(spec, period) };
    this.retention.set(spec, current);
    return current;
  }

  export(options: LedgerExportOptions): AsyncIterable<LedgerRow> {
    checkOptions('ledger.export', options, ['period', 'timeZone', 'now'], "{ period: '2026-11' }");
    const ref = parsePeriodName(options.period);
    if ('problem' in ref) throw new InvalidOptionError(`ledger.export: period ${ref.problem}`);
    const zone = canonicalTimeZone(options.timeZone ?? 'UTC');
    if ('problem' in zone) throw new InvalidOptionError(`ledger.export: timeZone ${zone.problem}`);
    const now = options.now === undefined ? (this.clock?.() ?? currentTime()) : checkNow(options.now);
    const store = this.check();
    const { start, end } = periodBounds(ref, zone.zone);
    return (async function* rows(): AsyncGenerator<LedgerRow> {
      try {
        for await (const page of store.rows(`${ref.name}@${zone.zone}`, now, EXPORT_PAGE)) {
          for (const sums of page) yield { key: sums.key, period: ref.name, periodStart: start, periodEnd: end, admitted: sums.admitted, refused: sums.refused };
        }
      } catch (error) {
        throw error instanceof TollgateError ? error : new StoreUnavailableError(`the store could not be read for the ledger export: ${(error as Error).message}`, { cause: error });
      }
    })();
  }

  stats(): LedgerStats {
    return { ...this.counts, dropped: this.store.ledger?.dropped() ?? 0 };
  }
}
