/**
 * `calendar: true` and `time_zone:` under `rate_limit`: the unit on the calendar in a time zone (a
 * month from the 1st, local midnight to midnight for a day; algorithms/calendar.ts) instead of
 * envoy's fixed lengths (`unit: month` alone is 30 days, aligned on the epoch, as envoy counts).
 * Checked against what the engine takes (policy.ts), each problem at the field at fault.
 */
import { canonicalTimeZone } from '../../algorithms/calendar.js';
import type { RateLimitConfig, RuleUnit } from '../types.js';
import type { DocumentReader, Entry } from './fields.js';

/** envoy's units that are calendar units: `quarter` has no envoy unit (policies take it: window: 'quarter'). */
const CALENDAR_RULE_UNITS: readonly RuleUnit[] = ['day', 'week', 'month', 'year'];

type CalendarShape = Pick<RateLimitConfig, 'algorithm' | 'unitMultiplier' | 'syncIntervalMs' | 'calendar' | 'timeZone'> & { readonly unit: RuleUnit };

/** Whether `calendar` and `time_zone` fit the rest of the limit; reports each problem at its field. */
export function fitsCalendar(reader: DocumentReader, fields: ReadonlyMap<string, Entry>, shape: CalendarShape): boolean {
  const zoneEntry = fields.get('time_zone');
  if (shape.calendar !== true) {
    if (zoneEntry?.value === undefined) return true;
    reader.report(zoneEntry.key, zoneEntry.path, `time_zone applies with calendar: true (the unit on the calendar in that zone); add calendar: true, or remove time_zone`);
    return false;
  }
  const calendarEntry = fields.get('calendar')!;
  const problems: [Entry | undefined, string][] = [
    [shape.algorithm === 'fixed-window' ? undefined : calendarEntry, `calendar: true applies to algorithm fixed-window only (the default), not ${shape.algorithm}; remove algorithm, or remove calendar`],
    [CALENDAR_RULE_UNITS.includes(shape.unit) ? undefined : fields.get('unit'), `calendar: true takes unit ${CALENDAR_RULE_UNITS.join(', ')}, not ${shape.unit}; use one of those, or remove calendar for a window of fixed length`],
    [shape.unitMultiplier === 1 ? undefined : fields.get('unit_multiplier'), `calendar: true counts in one calendar ${shape.unit} at a time; remove unit_multiplier, or remove calendar for a window of ${shape.unitMultiplier} × the unit's fixed length`],
    [shape.syncIntervalMs === undefined ? undefined : fields.get('sync_interval_ms'), 'sync_interval_ms (local-first) cannot sync a calendar window; remove it (lease_size works with calendar: true)'],
  ];
  const zone = canonicalTimeZone(shape.timeZone ?? 'UTC');
  if ('problem' in zone) problems.push([zoneEntry, `time_zone ${zone.problem}`]);
  let fits = true;
  for (const [entry, problem] of problems) {
    if (entry === undefined) continue;
    // A value at fault (the unit, the zone) is pointed at; a field that does not fit, at its name.
    reader.report(entry === zoneEntry || entry === fields.get('unit') ? entry.value : entry.key, entry.path, problem);
    fits = false;
  }
  return fits;
}
