/**
 * A usage ledger's periods (docs/quotas.md §3): which calendar period a decision is billed in, the
 * period's name (`2026-11`, `2026-11-28`, `2026-W48`, `2026-Q4`, `2026`), how long it is kept, and
 * the checks of a policy's `ledger` option. Ledger periods are always calendar periods in a time
 * zone — a bill covers a day, a week, a month, a quarter or a year — by default those of the
 * policy's calendar window, or a UTC month for any other window.
 *
 * A foundation (layer 0, like calendar.ts, on which it builds): policy.ts compiles a policy's
 * `ledger` with it, the limiter and the stores name periods with it. Imports only errors.ts and calendar.ts.
 */
import { InvalidPolicyError, describeValue } from '../errors.js';
import { CALENDAR_UNITS, calendarPeriods, canonicalTimeZone, computePeriod, isCalendarUnit, type CalendarPeriod, type CalendarPeriods, type CalendarUnit } from './calendar.js';

/** A policy's `ledger` as users write it: `true`, or the fields below. */
export interface LedgerOptions {
  /** The period usage is summed over (default: the policy's calendar window, else `'month'`). */
  readonly period?: CalendarUnit;
  /** Its IANA time zone (default: the calendar window's, else `'UTC'`). */
  readonly timeZone?: string;
  /** How many periods are kept, the current one included (1 to 1,000; default 13). */
  readonly keep?: number;
  /** Count refused units too (default false: only admitted units). */
  readonly refused?: boolean;
  /** Request ids remembered per key and period to bill a retry once (1 to 100,000; default 1,000). */
  readonly ids?: number;
}

/** A compiled ledger: what every decision of its policy records, and where. */
export interface LedgerSpec {
  readonly periods: CalendarPeriods;
  readonly keep: number;
  readonly refused: boolean;
  readonly ids: number;
}

export const LEDGER_RANGES = { keep: { min: 1, max: 1000, fallback: 13 }, ids: { min: 1, max: 100_000, fallback: 1000 } } as const;
const LEDGER_FIELDS = ['period', 'timeZone', 'keep', 'refused', 'ids'];

/** The ledger of a policy's `ledger` option (undefined when absent or false); InvalidPolicyError naming the fix. */
export function checkLedger(value: unknown, calendar: CalendarPeriods | undefined): LedgerSpec | undefined {
  if (value === undefined || value === false) return undefined;
  const options: LedgerOptions = value === true ? {} : (value as LedgerOptions);
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidPolicyError('ledger', `ledger must be true or { period, timeZone, keep, refused, ids }, got ${describeValue(value)}`);
  }
  const unknown = Object.keys(options).find((name) => !LEDGER_FIELDS.includes(name));
  if (unknown !== undefined) throw new InvalidPolicyError('ledger', `unknown ledger field ${JSON.stringify(unknown)}; a ledger has ${LEDGER_FIELDS.join(', ')}`);
  if (options.period !== undefined && !isCalendarUnit(options.period)) {
    throw new InvalidPolicyError('ledger', `ledger.period must be one of ${CALENDAR_UNITS.join(', ')}, got ${describeValue(options.period)}`);
  }
  if (options.refused !== undefined && typeof options.refused !== 'boolean') {
    throw new InvalidPolicyError('ledger', `ledger.refused must be true or false, got ${describeValue(options.refused)}`);
  }
  const unit = options.period ?? calendar?.unit ?? 'month';
  const zone = canonicalTimeZone(options.timeZone ?? (options.period === undefined ? calendar?.timeZone : undefined) ?? 'UTC');
  if ('problem' in zone) throw new InvalidPolicyError('ledger', `ledger.timeZone ${zone.problem}`);
  return Object.freeze({ periods: calendarPeriods(unit, zone.zone), keep: ledgerNumber('keep', options.keep), refused: options.refused === true, ids: ledgerNumber('ids', options.ids) });
}

function ledgerNumber(name: 'keep' | 'ids', value: unknown): number {
  const range = LEDGER_RANGES[name];
  if (value === undefined) return range.fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < range.min || value > range.max) {
    throw new InvalidPolicyError('ledger', `ledger.${name} must be a whole number from ${range.min} to ${range.max}, got ${describeValue(value)}`);
  }
  return value;
}

const dateFormatters = new Map<string, Intl.DateTimeFormat>();

/** The local date (year, month 0-11, day) of `at` in `zone`. */
function localDate(zone: string, at: number): [number, number, number] {
  let formatter = dateFormatters.get(zone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', { timeZone: zone, year: 'numeric', month: 'numeric', day: 'numeric' });
    dateFormatters.set(zone, formatter);
  }
  const fields: Record<string, number> = {};
  for (const part of formatter.formatToParts(at)) if (part.type !== 'literal') fields[part.type] = Number(part.value);
  return [fields.year!, fields.month! - 1, fields.day!];
}

const two = (n: number): string => String(n).padStart(2, '0');

/** The ISO week-year and week of the local date (a Monday's week: its Thursday's year). */
function isoWeek(year: number, month: number, day: number): [number, number] {
  const date = new Date(Date.UTC(year, month, day));
  const thursday = new Date(date.getTime() + (3 - ((date.getUTCDay() + 6) % 7)) * 86_400_000);
  const weekYear = thursday.getUTCFullYear();
  return [weekYear, Math.floor((thursday.getTime() - Date.UTC(weekYear, 0, 1)) / (7 * 86_400_000)) + 1];
}

/** The name of the period of `unit` starting at `start` in `zone`: `2026-11-28`, `2026-W48`, `2026-11`, `2026-Q4`, `2026`. */
export function periodName(unit: CalendarUnit, zone: string, start: number): string {
  const [year, month, day] = localDate(zone, start);
  switch (unit) {
    case 'day':
      return `${year}-${two(month + 1)}-${two(day)}`;
    case 'week': {
      const [weekYear, week] = isoWeek(year, month, day);
      return `${weekYear}-W${two(week)}`;
    }
    case 'month':
      return `${year}-${two(month + 1)}`;
    case 'quarter':
      return `${year}-Q${Math.floor(month / 3) + 1}`;
    case 'year':
      return String(year);
  }
}

/** A period named by {@link periodName}: its unit and the UTC midnight of its first local day. */
export interface PeriodRef {
  readonly name: string;
  readonly unit: CalendarUnit;
  readonly firstDay: number;
}

const HOW_TO_NAME = "name a period as 2026 (year), 2026-Q4 (quarter), 2026-11 (month), 2026-W48 (ISO week) or 2026-11-28 (day)";

/** The period `text` names, or a message saying how to name one. */
export function parsePeriodName(text: unknown): PeriodRef | { readonly problem: string } {
  const bad = { problem: `${describeValue(text)} is not a period; ${HOW_TO_NAME}` };
  if (typeof text !== 'string' || text.length > 10) return bad;
  let match: RegExpExecArray | null;
  if ((match = /^(\d{4})$/.exec(text)) !== null) return { name: text, unit: 'year', firstDay: Date.UTC(Number(match[1]), 0, 1) };
  if ((match = /^(\d{4})-Q([1-4])$/.exec(text)) !== null) return { name: text, unit: 'quarter', firstDay: Date.UTC(Number(match[1]), (Number(match[2]) - 1) * 3, 1) };
  if ((match = /^(\d{4})-(\d{2})$/.exec(text)) !== null) {
    const month = Number(match[2]);
    return month >= 1 && month <= 12 ? { name: text, unit: 'month', firstDay: Date.UTC(Number(match[1]), month - 1, 1) } : bad;
  }
  if ((match = /^(\d{4})-W(\d{2})$/.exec(text)) !== null) {
    const year = Number(match[1]);
    const week = Number(match[2]);
    // ISO week 1 holds January 4th; its Monday is week 1's first day.
    const jan4 = new Date(Date.UTC(year, 0, 4));
    const firstDay = jan4.getTime() - ((jan4.getUTCDay() + 6) % 7) * 86_400_000 + (week - 1) * 7 * 86_400_000;
    return week >= 1 && isoWeek(...utcDate(firstDay))[0] === year ? { name: text, unit: 'week', firstDay } : bad;
  }
  if ((match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text)) !== null) {
    const firstDay = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
    return `${utcDate(firstDay)[0]}-${two(utcDate(firstDay)[1] + 1)}-${two(utcDate(firstDay)[2])}` === text ? { name: text, unit: 'day', firstDay } : bad;
  }
  return bad;
}

function utcDate(at: number): [number, number, number] {
  const date = new Date(at);
  return [date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()];
}

/** The instants of period `ref` in `zone`: [start, end). */
export function periodBounds(ref: PeriodRef, zone: string): CalendarPeriod {
  // Local noon of its first day is within 14 hours of that instant: in the period, or the day before it.
  const guess = computePeriod(ref.unit, zone, ref.firstDay + 12 * 3_600_000);
  if (periodName(ref.unit, zone, guess.start) === ref.name) return guess;
  const before = computePeriod(ref.unit, zone, guess.start - 1);
  return periodName(ref.unit, zone, before.start) === ref.name ? before : computePeriod(ref.unit, zone, guess.end);
}

/** The instant a ledger period starting at `start` is forgotten: the end of the `keep`-th period from it. */
export function retentionEnd(spec: LedgerSpec, period: CalendarPeriod): number {
  let end = period.end;
  for (let i = 1; i < spec.keep; i++) end = computePeriod(spec.periods.unit, spec.periods.timeZone, end).end;
  return end;
}
