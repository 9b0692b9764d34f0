/**
 * Calendar windows: a fixed window whose periods follow the calendar in a time zone (a day from
 * local midnight, an ISO week from Monday 00:00, a month from the 1st, a quarter from Jan/Apr/Jul/Oct
 * 1st, a year from Jan 1st), so a local day may last 23 or 25 hours and a month 28 to 31 days.
 * A period is [start, end): `end` is the next period's start and the decision's `resetAt`.
 *
 * Time-zone data comes from `Intl.DateTimeFormat` (no dependency). A formatter call costs a few
 * µs, so each (unit, zone) keeps its current and previous period and computes a new one only when
 * `now` leaves both: a decision on the cached period costs two comparisons.
 *
 * A foundation (layer 0, like catalog.ts): policy.ts checks zones with it and the algorithms and
 * stores ask it for periods. Imports only errors.ts.
 */
import { InvalidPolicyError, InvalidTimeError, describeValue } from '../errors.js';

/** The calendar units a fixed window may be given instead of a length. */
export const CALENDAR_UNITS = ['day', 'week', 'month', 'quarter', 'year'] as const;
export type CalendarUnit = (typeof CALENDAR_UNITS)[number];

const DAY_MS = 86_400_000;

/**
 * A calendar unit's nominal length: what `windowMs` reports (RateLimit-Policy's `w=`, traces);
 * envoy's month of 30 days and year of 365 days, a quarter of 3 such months. Never used to find a period.
 */
export const CALENDAR_NOMINAL_MS: Readonly<Record<CalendarUnit, number>> = Object.freeze({
  day: DAY_MS,
  week: 7 * DAY_MS,
  month: 30 * DAY_MS,
  quarter: 90 * DAY_MS,
  year: 365 * DAY_MS,
});

/** Whether `value` names a calendar unit. */
export function isCalendarUnit(value: unknown): value is CalendarUnit {
  return typeof value === 'string' && (CALENDAR_UNITS as readonly string[]).includes(value);
}

/** The latest instant a calendar period is computed for: JavaScript dates end at 8.64e15 ms (year 275,760). */
export const LAST_CALENDAR_TIME = Date.UTC(275_000, 0, 1);

/** An IANA zone name as written: `Area/City`, `UTC`, `Etc/GMT-1` (not an offset such as `+01:00`). */
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/;
const HOW_TO_WRITE_ZONE = "write an IANA time zone name, Area/City as in 'Europe/Paris', 'America/New_York', 'Asia/Tokyo', or 'UTC' (a fixed offset is 'Etc/GMT-1' for UTC+1)";

const formatters = new Map<string, Intl.DateTimeFormat>();

/** The canonical spelling of a time zone (`europe/paris` → `Europe/Paris`), or why it is not one. */
export function canonicalTimeZone(value: unknown): { readonly zone: string } | { readonly problem: string } {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64 || !ZONE_NAME.test(value)) {
    return { problem: `${typeof value === 'string' ? JSON.stringify(value) : String(value)} is not a time zone name; ${HOW_TO_WRITE_ZONE}` };
  }
  try {
    return { zone: formatterOf(value).resolvedOptions().timeZone };
  } catch {
    return { problem: `${JSON.stringify(value)} is not a time zone this Node.js knows; ${HOW_TO_WRITE_ZONE}` };
  }
}

function formatterOf(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** The wall clock of `at` in `zone`, written as if it were UTC (epoch ms of that wall time, whole seconds). */
function wallClock(zone: string, at: number): number {
  const fields: Record<string, number> = {};
  for (const part of formatterOf(zone).formatToParts(at)) {
    if (part.type !== 'literal') fields[part.type] = Number(part.value);
  }
  return Date.UTC(fields.year!, fields.month! - 1, fields.day!, fields.hour!, fields.minute!, fields.second!);
}

/** The zone's offset from UTC at `at`, in ms. */
function offsetAt(zone: string, at: number): number {
  return wallClock(zone, at) - Math.floor(at / 1000) * 1000;
}

/**
 * The first instant whose wall clock in `zone` reads `wall` (a local midnight written as if UTC)
 * or later: the earlier of two when the clocks fell back over it, the end of the gap when they
 * sprang forward over it (a midnight that does not exist starts its day at the first instant after it).
 */
function firstInstantOf(zone: string, wall: number): number {
  const before = offsetAt(zone, wall - DAY_MS);
  const after = offsetAt(zone, wall + DAY_MS);
  let first = Number.POSITIVE_INFINITY;
  for (const offset of before === after ? [before] : [before, after]) {
    if (offsetAt(zone, wall - offset) === offset) first = Math.min(first, wall - offset);
  }
  if (first !== Number.POSITIVE_INFINITY) return first;
  // A gap: the clocks jumped over `wall` at an instant in (wall − after, wall − before].
  let low = wall - Math.max(before, after);
  let high = wall - Math.min(before, after);
  while (high - low > 1) {
    const middle = low + Math.floor((high - low) / 2);
    if (wallClock(zone, middle) >= wall) high = middle;
    else low = middle;
  }
  return high;
}

/** The local wall dates (as UTC midnights) a period of `unit` holding the local date `today` starts and ends on. */
function periodDates(unit: CalendarUnit, today: Date): [number, number] {
  const year = today.getUTCFullYear();
  const month = today.getUTCMonth();
  const day = today.getUTCDate();
  switch (unit) {
    case 'day':
      return [Date.UTC(year, month, day), Date.UTC(year, month, day + 1)];
    case 'week': {
      // ISO weeks: Monday is the first day (getUTCDay: Sunday 0 … Saturday 6).
      const monday = day - ((today.getUTCDay() + 6) % 7);
      return [Date.UTC(year, month, monday), Date.UTC(year, month, monday + 7)];
    }
    case 'month':
      return [Date.UTC(year, month, 1), Date.UTC(year, month + 1, 1)];
    case 'quarter': {
      const first = month - (month % 3);
      return [Date.UTC(year, first, 1), Date.UTC(year, first + 3, 1)];
    }
    case 'year':
      return [Date.UTC(year, 0, 1), Date.UTC(year + 1, 0, 1)];
  }
}

/** A calendar period, [start, end) in epoch ms. */
export interface CalendarPeriod {
  readonly start: number;
  readonly end: number;
}

const NO_PERIOD: CalendarPeriod = Object.freeze({ start: 0, end: 0 });

/** The period of `unit` in `zone` holding `at` (computed: several formatter calls). */
export function computePeriod(unit: CalendarUnit, zone: string, at: number): CalendarPeriod {
  if (at > LAST_CALENDAR_TIME) {
    throw new InvalidTimeError(`a calendar window decides times up to ${LAST_CALENDAR_TIME} (year 275,000), got ${at}`);
  }
  const wall = wallClock(zone, at);
  const [startWall, endWall] = periodDates(unit, new Date(wall));
  const start = firstInstantOf(zone, startWall);
  const end = firstInstantOf(zone, endWall);
  // Clocks set back over a boundary show the earlier period's dates again after it began: that
  // time belongs to the later period, as a fixed window's clock that goes back keeps counting.
  return at >= end ? computePeriod(unit, zone, end) : Object.freeze({ start, end });
}

/**
 * The periods of one unit in one zone, shared by every policy naming them: the period holding an
 * instant, cached, and the boundaries a Redis script picks its period from.
 */
export class CalendarPeriods {
  private current = NO_PERIOD;
  private previous = NO_PERIOD;
  private around: readonly [number, number, number] = [0, 0, 0];
  /** The instants `around` was chosen for: [from, until). */
  private aroundFrom = 0;
  private aroundUntil = 0;

  constructor(
    readonly unit: CalendarUnit,
    readonly timeZone: string,
  ) {}

  /** The period holding `now`: no formatter call while `now` stays in the current or the previous period. */
  periodAt(now: number): CalendarPeriod {
    const current = this.current;
    if (now >= current.start && now < current.end) return current;
    const previous = this.previous;
    this.previous = current;
    this.current = now >= previous.start && now < previous.end ? previous : computePeriod(this.unit, this.timeZone, now);
    return this.current;
  }

  /**
   * Three consecutive boundaries b0 < b1 < b2 with `now` in [b0, b2) and at least half a period
   * from either end: the period holding `now` and the neighbour on its nearer side. A Redis
   * script picks the period holding its own clock from them, so nodes and Redis may disagree on
   * the time by up to half a period (11.5 hours for a day) and still name the same periods.
   */
  boundariesAround(now: number): readonly [number, number, number] {
    if (now >= this.aroundFrom && now < this.aroundUntil) return this.around;
    const { start, end } = computePeriod(this.unit, this.timeZone, now);
    const middle = start + Math.floor((end - start) / 2);
    if (now < middle) {
      this.around = Object.freeze([computePeriod(this.unit, this.timeZone, start - 1).start, start, end] as const);
      this.aroundFrom = start;
      this.aroundUntil = middle;
    } else {
      this.around = Object.freeze([start, end, computePeriod(this.unit, this.timeZone, end).end] as const);
      this.aroundFrom = middle;
      this.aroundUntil = end;
    }
    return this.around;
  }
}

const shared = new Map<string, CalendarPeriods>();

/** The one {@link CalendarPeriods} of `unit` in `zone` (a canonical zone name) in this process. */
export function calendarPeriods(unit: CalendarUnit, zone: string): CalendarPeriods {
  const id = `${unit}@${zone}`;
  let periods = shared.get(id);
  if (periods === undefined) {
    periods = new CalendarPeriods(unit, zone);
    shared.set(id, periods);
  }
  return periods;
}

/** The fields of a policy that say whether, and how, its window is on the calendar. */
export interface CalendarFields {
  readonly algorithm: string;
  readonly window: unknown;
  readonly timeZone?: string | undefined;
  readonly windowStart?: string | undefined;
}

/**
 * The periods of a calendar window (`window: 'month'`, `timeZone`), or undefined for a window of a
 * length; throws unless on an aligned fixed window with a time zone Node knows (policy.ts checks
 * every policy with it).
 */
export function checkCalendar(policy: CalendarFields): CalendarPeriods | undefined {
  if (!isCalendarUnit(policy.window)) {
    if (policy.timeZone === undefined) return undefined;
    throw new InvalidPolicyError('timeZone', `timeZone applies to calendar windows only (window: ${CALENDAR_UNITS.map((unit) => `'${unit}'`).join(', ')}), not to a window of ${describeValue(policy.window)}; remove it or use a calendar window`);
  }
  if (policy.algorithm !== 'fixed-window') {
    throw new InvalidPolicyError('window', `a calendar window ('${policy.window}') applies to fixed-window only, not ${policy.algorithm}; use algorithm: 'fixed-window', or a window of a length such as '1d'`);
  }
  if (policy.windowStart === 'first-hit') {
    throw new InvalidPolicyError('windowStart', `a calendar window ('${policy.window}') starts on the calendar, not at a key's first hit; remove windowStart: 'first-hit', or use a window of a length such as '30d'`);
  }
  const zone = canonicalTimeZone(policy.timeZone ?? 'UTC');
  if ('problem' in zone) throw new InvalidPolicyError('timeZone', `timeZone ${zone.problem}`);
  return calendarPeriods(policy.window, zone.zone);
}
