/**
 * `calendar: true` and `time_zone:` under `rate_limit`: a rule's unit on the calendar in a zone
 * reaches the limiter (a month resets on the 1st in Paris), envoy's plain units keep their fixed
 * lengths, and every misuse is refused at its file:line:col.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { checkRules, parseRules } from '../../src/rules/parse/index.js';
import { compileRules } from '../../src/rules/ruleset.js';

const rules = (rateLimit: string): string => `domain: api
descriptors:
  - key: plan
    rate_limit:
${rateLimit
  .trim()
  .split('\n')
  .map((line) => `      ${line.trim()}`)
  .join('\n')}
`;

const MONTHLY = rules(`
  unit: month
  requests_per_unit: 2
  calendar: true
  time_zone: Europe/Paris
`);

async function resetsOf(yaml: string, times: readonly number[]): Promise<number[]> {
  let now = 0;
  const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(yaml, 'api.yaml'), [yaml]), clock: () => now });
  const resets: number[] = [];
  for (const at of times) {
    now = at;
    const answer = await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'plan', value: 'pro' }] }] });
    resets.push(answer.statuses[0]!.code === 'OK' ? answer.statuses[0]!.durationUntilReset : -answer.statuses[0]!.durationUntilReset);
  }
  await limiter.close();
  return resets;
}

const MISUSES: ReadonlyArray<readonly [string, string]> = [
  ['unit: month\nrequests_per_unit: 5\ntime_zone: Europe/Paris', 'cal.yaml:7:7: descriptors[0].rate_limit.time_zone: time_zone applies with calendar: true (the unit on the calendar in that zone); add calendar: true, or remove time_zone'],
  ['unit: month\nrequests_per_unit: 5\ncalendar: true\ntime_zone: Europe/Pariss', `cal.yaml:8:18: descriptors[0].rate_limit.time_zone: time_zone "Europe/Pariss" is not a time zone this Node.js knows; write an IANA time zone name, Area/City as in 'Europe/Paris', 'America/New_York', 'Asia/Tokyo', or 'UTC' (a fixed offset is 'Etc/GMT-1' for UTC+1)`],
  ['unit: hour\nrequests_per_unit: 5\ncalendar: true', 'cal.yaml:5:13: descriptors[0].rate_limit.unit: calendar: true takes unit day, week, month, year, not hour; use one of those, or remove calendar for a window of fixed length'],
  ['unit: month\nrequests_per_unit: 5\ncalendar: true\nalgorithm: token-bucket', 'cal.yaml:7:7: descriptors[0].rate_limit.calendar: calendar: true applies to algorithm fixed-window only (the default), not token-bucket; remove algorithm, or remove calendar'],
  ['unit: day\nrequests_per_unit: 5\ncalendar: true\nunit_multiplier: 2', "cal.yaml:8:7: descriptors[0].rate_limit.unit_multiplier: calendar: true counts in one calendar day at a time; remove unit_multiplier, or remove calendar for a window of 2 × the unit's fixed length"],
  ['unit: day\nrequests_per_unit: 5\ncalendar: true\nsync_interval_ms: 100', 'cal.yaml:8:7: descriptors[0].rate_limit.sync_interval_ms: sync_interval_ms (local-first) cannot sync a calendar window; remove it (lease_size works with calendar: true)'],
  ['unit: day\nrequests_per_unit: 5\ncalendar: monthly', 'cal.yaml:7:17: descriptors[0].rate_limit.calendar: calendar must be true or false, got "monthly"'],
  ['unlimited: true\ncalendar: true', 'cal.yaml:6:7: descriptors[0].rate_limit.calendar: unlimited: true takes no calendar; remove calendar, or remove unlimited to enforce a limit'],
];

describe('rules: calendar units', () => {
  it('read calendar: true and time_zone, and count a month from the 1st in that zone', async () => {
    const [domain] = parseRules(MONTHLY, 'api.yaml');
    expect(domain!.descriptors[0]!.rateLimit).toMatchObject({ unit: 'month', calendar: true, timeZone: 'Europe/Paris' });
    const december = Date.parse('2026-11-30T23:00:00Z'); // 1 December, 00:00 in Paris
    // Two admitted in November, the third denied until December begins in Paris, then admitted.
    const resets = await resetsOf(MONTHLY, [december - 60_000, december - 60_000, december - 1_000, december]);
    expect(resets).toEqual([60_000, 60_000, -1_000, Date.parse('2026-12-31T23:00:00Z') - december]);
  });

  it("keep envoy's plain units as fixed lengths without calendar: true (a day is 86,400,000 ms from the epoch)", async () => {
    const plain = rules(`
      unit: day
      requests_per_unit: 5
    `);
    const calendarDay = rules(`
      unit: day
      requests_per_unit: 5
      calendar: true
      time_zone: America/New_York
    `);
    const at = Date.parse('2026-07-01T12:00:00Z');
    // UTC midnight is 12 h away; New York's (04:00 UTC) 16 h.
    expect(await resetsOf(plain, [at])).toEqual([12 * 3_600_000]);
    expect(await resetsOf(calendarDay, [at])).toEqual([16 * 3_600_000]);
  });

  it.each(MISUSES)('refuse a misuse at its file:line:col: %j', (rateLimit, expected) => {
    expect(checkRules(rules(rateLimit), 'cal.yaml').errors.map((error) => error.message)).toEqual([expected]);
  });
});
