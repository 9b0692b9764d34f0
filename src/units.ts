/**
 * Time units, once: the units of duration strings (`500ms`, `1m`, `1w`), envoy's rule units
 * (`second` ... `year`, with their names in envoy's protocol), and the two ways a window is
 * written back (`1h` in names and keys, `2 hours` in messages). Imports nothing.
 */

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;

/** Milliseconds per unit of a duration string. */
export const DURATION_UNIT_MS = Object.freeze({ ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY, w: WEEK });

/** A unit of a duration string. */
export type DurationUnit = keyof typeof DURATION_UNIT_MS;

/** The duration-string units, smallest first. */
export const DURATION_UNITS = Object.keys(DURATION_UNIT_MS) as readonly DurationUnit[];

/**
 * envoy's rule units: milliseconds, and the name of the unit in envoy's RateLimitResponse
 * (`RateLimit.Unit`; its numbers are in the .proto). `month` is 30 days and `year` 365 days, as
 * envoy counts them.
 */
export const RULE_UNITS = Object.freeze({
  second: { ms: SECOND, envoyName: 'SECOND' },
  minute: { ms: MINUTE, envoyName: 'MINUTE' },
  hour: { ms: HOUR, envoyName: 'HOUR' },
  day: { ms: DAY, envoyName: 'DAY' },
  week: { ms: WEEK, envoyName: 'WEEK' },
  month: { ms: 30 * DAY, envoyName: 'MONTH' },
  year: { ms: 365 * DAY, envoyName: 'YEAR' },
});

/** envoy's units; `month` is 30 days and `year` 365 days, as envoy counts them. */
export type RuleUnit = keyof typeof RULE_UNITS;

/** envoy's units, shortest first. */
export const RULE_UNIT_NAMES = Object.keys(RULE_UNITS) as readonly RuleUnit[];

function perRuleUnit<T>(value: (unit: (typeof RULE_UNITS)[RuleUnit]) => T): Readonly<Record<RuleUnit, T>> {
  return Object.freeze(Object.fromEntries(RULE_UNIT_NAMES.map((name) => [name, value(RULE_UNITS[name])])) as Record<RuleUnit, T>);
}

/** A rule's window: `multiplier` of envoy's `unit`, in milliseconds. */
export function ruleWindowMs(unit: RuleUnit, multiplier: number): number {
  return RULE_UNITS[unit].ms * multiplier;
}

/** Seconds per envoy unit. */
export const UNIT_SECONDS = perRuleUnit((unit) => unit.ms / SECOND);

/** envoy's unit enum names, by rule unit. */
export const ENVOY_UNIT_NAMES = perRuleUnit((unit) => unit.envoyName);

/** The units a window is written back in, largest first, with their words. */
const WINDOW_UNITS: ReadonlyArray<readonly [DurationUnit, string]> = [
  ['w', 'week'],
  ['d', 'day'],
  ['h', 'hour'],
  ['m', 'minute'],
  ['s', 'second'],
];

/**
 * The window in its largest whole unit, as a duration string (`1h`, `90s`, `1500ms`): one
 * spelling per window, readable back by parseDuration.
 */
export function compactWindow(ms: number): string {
  for (const [unit] of WINDOW_UNITS) {
    const size = DURATION_UNIT_MS[unit];
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** The window in words, in its largest whole unit (`minute`, `2 hours`, `1500 ms`). */
export function describeWindow(ms: number): string {
  for (const [unit, word] of WINDOW_UNITS) {
    const size = DURATION_UNIT_MS[unit];
    if (ms % size === 0) return ms === size ? word : `${ms / size} ${word}s`;
  }
  return `${ms} ms`;
}
