/**
 * Calendar windows beyond the conformance vectors (test/vectors/fixed-window-calendar.json): the
 * policies refused and why, midnights that do not exist, the periods a Redis script is sent, and
 * the cache that keeps the time-zone formatter off the hot path.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { computePeriod, calendarPeriods } from '../../src/algorithms/calendar.js';
import { InvalidOptionError, InvalidPolicyError, compilePolicy, createLimiter, memoryStore, type Policy } from '../../src/index.js';

const utc = (iso: string): number => Date.parse(iso);
const MONTH: Policy = { algorithm: 'fixed-window', limit: 10, window: 'month', timeZone: 'Europe/Paris' };

function refusal(policy: unknown): InvalidPolicyError {
  try {
    compilePolicy(policy as Policy);
  } catch (error) {
    if (error instanceof InvalidPolicyError) return error;
    throw error;
  }
  throw new Error('the policy was accepted');
}

describe('calendar window policies', () => {
  it('refuse a calendar window on any algorithm but fixed-window, naming fixed-window', () => {
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'gcra', 'sliding-window', 'sliding-log'] as const) {
      const error = refusal({ ...MONTH, algorithm });
      expect(error.field).toBe('window');
      expect(error.message).toContain(`a calendar window ('month') applies to fixed-window only, not ${algorithm}`);
    }
  });

  it("refuse windowStart: 'first-hit' with a calendar window (a period starts on the calendar)", () => {
    const error = refusal({ ...MONTH, windowStart: 'first-hit' });
    expect(error.field).toBe('windowStart');
    expect(error.message).toMatch(/starts on the calendar, not at a key's first hit/);
    expect(compilePolicy({ ...MONTH, windowStart: 'aligned' }).calendar?.unit).toBe('month');
  });

  it('refuse an unknown or malformed time zone with how to write one, and a timeZone on a window of a length', () => {
    for (const timeZone of ['Mars/Olympus_Mons', '+01:00', '', 'Europe/Paris; DROP', 42, 'x'.repeat(65)]) {
      const error = refusal({ ...MONTH, timeZone });
      expect(error.field).toBe('timeZone');
      expect(error.message).toContain("'Europe/Paris'");
    }
    const error = refusal({ algorithm: 'fixed-window', limit: 1, window: '1d', timeZone: 'Europe/Paris' });
    expect(error.field).toBe('timeZone');
    expect(error.message).toMatch(/applies to calendar windows only/);
  });

  it('default to UTC, spell zones canonically, and keep each (unit, zone) in its own state space', () => {
    const utcMonth = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: 'month' });
    expect(utcMonth.calendar?.timeZone).toBe('UTC');
    expect(utcMonth.windowMs).toBe(30 * 86_400_000);
    const paris = compilePolicy(MONTH);
    expect(compilePolicy({ ...MONTH, timeZone: 'europe/paris' }).stateId).toBe(paris.stateId);
    expect(new Set([utcMonth.stateId, paris.stateId, compilePolicy({ ...MONTH, window: 'day' }).stateId, compilePolicy({ ...MONTH, window: '30d', timeZone: undefined }).stateId]).size).toBe(4);
  });

  it('inline policies differing only in timeZone are decided in their own zones', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const now = utc('2026-11-30T23:30:00Z'); // December in Paris, still November in New York
    const paris = await limiter.limit('k', { algorithm: 'fixed-window', limit: 1, window: 'month', timeZone: 'Europe/Paris' }, { now });
    const newYork = await limiter.limit('k', { algorithm: 'fixed-window', limit: 1, window: 'month', timeZone: 'America/New_York' }, { now });
    expect(paris.resetAt).toBe(utc('2026-12-31T23:00:00Z'));
    expect(newYork.resetAt).toBe(utc('2026-12-01T05:00:00Z'));
    await limiter.close();
  });
});

describe('calendar windows and the modes that decide without the store', () => {
  it('local-first refuses a calendar window; a lease admits the limit and lapses at the period end', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy: Policy = { algorithm: 'fixed-window', limit: 20, window: 'day', timeZone: 'America/New_York' };
    const now = utc('2026-11-01T03:59:00Z'); // a minute before 1 November in New York
    await expect(limiter.limit('k', policy, { syncIntervalMs: 100, now })).rejects.toThrow(InvalidOptionError);
    await expect(limiter.limit('k', policy, { syncIntervalMs: 100, now })).rejects.toThrow(/with a calendar window \('day'\)/);
    const decisions = [];
    for (let i = 0; i < 21; i++) decisions.push(await limiter.limit('leased', policy, { lease: 5, now }));
    expect(decisions.filter((decision) => decision.allowed)).toHaveLength(20);
    expect(decisions.every((decision) => decision.resetAt === utc('2026-11-01T04:00:00Z'))).toBe(true);
    // The next day (25 hours long: the clocks fall back) starts with the whole limit.
    expect(await limiter.limit('leased', policy, { lease: 5, now: utc('2026-11-01T04:00:00Z') })).toMatchObject({ allowed: true, resetAt: utc('2026-11-02T05:00:00Z') });
    await limiter.close();
  });
});

describe('calendar periods', () => {
  it('start a day whose midnight does not exist at the first instant after it', () => {
    // America/Havana springs forward at 00:00 (2026-03-08), America/Santiago at 24:00 (2026-09-05).
    expect(computePeriod('day', 'America/Havana', utc('2026-03-08T12:00:00Z'))).toEqual({ start: utc('2026-03-08T05:00:00Z'), end: utc('2026-03-09T04:00:00Z') });
    expect(computePeriod('day', 'America/Santiago', utc('2026-09-06T12:00:00Z'))).toEqual({ start: utc('2026-09-06T04:00:00Z'), end: utc('2026-09-07T03:00:00Z') });
    // Pacific/Apia skipped 2011-12-30 altogether: 29 December ends where 31 December begins.
    expect(computePeriod('day', 'Pacific/Apia', utc('2011-12-29T12:00:00Z')).end).toBe(computePeriod('day', 'Pacific/Apia', utc('2011-12-30T12:00:00Z')).start);
  });

  it('give a Redis script three consecutive boundaries with its clock at least half a period from either end', () => {
    const days = calendarPeriods('day', 'Europe/Paris');
    // Early in the 23-hour day of 2026-03-29: the day before, and that day.
    expect(days.boundariesAround(utc('2026-03-29T01:00:00Z'))).toEqual([utc('2026-03-27T23:00:00Z'), utc('2026-03-28T23:00:00Z'), utc('2026-03-29T22:00:00Z')]);
    // Late in it: that day and the next.
    expect(days.boundariesAround(utc('2026-03-29T21:00:00Z'))).toEqual([utc('2026-03-28T23:00:00Z'), utc('2026-03-29T22:00:00Z'), utc('2026-03-30T22:00:00Z')]);
  });
});

describe('the calendar on the hot path', () => {
  afterEach(() => vi.restoreAllMocks());

  it('asks the time-zone formatter nothing while decisions stay in the cached period', async () => {
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }) });
    const policy: Policy = { algorithm: 'fixed-window', limit: 1_000_000, window: 'week', timeZone: 'Asia/Tokyo' };
    const start = utc('2026-06-03T00:00:00Z');
    await limiter.limit('warm', policy, { now: start });
    const formats = vi.spyOn(Intl.DateTimeFormat.prototype, 'formatToParts');
    for (let i = 0; i < 10_000; i++) await limiter.limit(`k${i % 100}`, policy, { now: start + i * 1_000 });
    expect(formats).not.toHaveBeenCalled();
    // Leaving the period computes the next one once.
    await limiter.limit('k0', policy, { now: utc('2026-06-10T00:00:00Z') });
    expect(formats.mock.calls.length).toBeGreaterThan(0);
    expect(formats.mock.calls.length).toBeLessThanOrEqual(12);
    await limiter.close();
  });
});
