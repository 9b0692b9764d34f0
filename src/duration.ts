/**
 * Durations: every duration in Tollgate's API is milliseconds, written either as an integer or as
 * a string with one unit (`500ms`, `1s`, `1m`, `3h`, `1d`, `1w`).
 */

import { describeValue } from './errors.js';
import { DURATION_UNITS, DURATION_UNIT_MS, type DurationUnit } from './units.js';

const DURATION_PATTERN = new RegExp(`^\\s*(\\d+)\\s*(${DURATION_UNITS.join('|')})\\s*$`);
/** "ms, s, m, h, d or w" */
const UNIT_LIST = `${DURATION_UNITS.slice(0, -1).join(', ')} or ${DURATION_UNITS.at(-1)!}`;

/**
 * Parses a duration into whole milliseconds (1 to 2^53 − 1), or returns an explanation of what is wrong.
 * Returning the problem (instead of throwing) lets each caller raise its own typed error.
 */
export function parseDuration(value: unknown): number | string {
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return `must be finite, got ${value}`;
    if (!Number.isInteger(value)) return `must be a whole number of milliseconds, got ${value}`;
    if (value < 1) return `must be at least 1 ms, got ${value}`;
    // Past 2^53 − 1 a double no longer holds every whole number: the window's arithmetic (and the Redis script) would round.
    if (!Number.isSafeInteger(value)) return `must be at most ${Number.MAX_SAFE_INTEGER} ms (2^53 − 1, about 285,000 years), got ${value}`;
    return value;
  }
  if (typeof value !== 'string') {
    return `must be milliseconds (a number) or a duration string like "500ms", "1s", "1m", "3h", "1d", "1w", got ${describeValue(value)}`;
  }
  const match = DURATION_PATTERN.exec(value);
  if (match === null) {
    return `${JSON.stringify(value)} is not a duration: write a whole number and one unit of ${UNIT_LIST} (e.g. "1m")`;
  }
  const ms = Number(match[1]) * DURATION_UNIT_MS[match[2] as DurationUnit];
  if (ms < 1) return `${JSON.stringify(value)} is zero: a window must be at least 1 ms`;
  if (!Number.isSafeInteger(ms)) return `${JSON.stringify(value)} is too long`;
  return ms;
}
