/**
 * Option objects, checked the same way everywhere: something other than a plain object is refused
 * with an example, and a misspelt option (`windw`, `maxkeys`) is refused with the names that exist,
 * never ignored; and numeric options, from one table per module, refused in the same words
 * everywhere (`<name> must be a whole number from 1 to 100, got 0`).
 */
import { parseDuration } from './duration.js';
import { InvalidOptionError, describeValue } from './errors.js';

/**
 * envoyproxy/ratelimit's DEBUG_PORT: the admin listener's default port. Here, below the service, so
 * the admin commands' default URL does not load the service (src/cli/admin/connection.ts).
 */
export const DEFAULT_ADMIN_PORT = 6070;

/** The first own name of `object` that is not in `known`, or undefined. */
export function unknownName(object: object, known: readonly string[] | ReadonlySet<string>): string | undefined {
  const has = Array.isArray(known) ? (name: string) => known.includes(name) : (name: string) => (known as ReadonlySet<string>).has(name);
  for (const name of Object.keys(object)) if (!has(name)) return name;
  return undefined;
}

/**
 * Throws an {@link InvalidOptionError} unless `options` is a plain object naming only `known`
 * options. Worded `<where> options must be an object like <example>, got ...` and
 * `<where>: unknown option "x"; the options are a, b, c`, or with another `noun` (`call option`)
 * `unknown call option "x"; the call options are a, b`.
 */
export function checkOptions(
  where: string,
  options: unknown,
  known: readonly string[] | ReadonlySet<string>,
  example: string,
  noun = 'option',
): asserts options is object {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidOptionError(`${where} options must be an object like ${example}, got ${describeValue(options)}`);
  }
  const name = unknownName(options, known);
  if (name === undefined) return;
  throw new InvalidOptionError(`${noun === 'option' ? `${where}: ` : ''}unknown ${noun} ${JSON.stringify(name)}; the ${noun}s are ${[...known].join(', ')}`);
}

/**
 * What a whole-number option may hold: one row of a module's table of numeric options. The message
 * of a value out of it is built from the row, so every option is refused in the same words:
 * `<name> must be a whole number [of <unit>] from <min> to <max> [(<meaning>)], got <value>`.
 */
export interface WholeNumberRange {
  /** The smallest value allowed. */
  readonly min: number;
  /** The largest value allowed; absent, any safe integer from `min` (worded `≥ min`). */
  readonly max?: number;
  /** What the number counts, worded `a whole number of <unit>`: `ms`, `keys`. */
  readonly unit?: string;
  /** What the number means, in parentheses after the range: `0: off`, `one week`. */
  readonly meaning?: string;
  /** The value when the option is left out (undefined); without one, the option is required. */
  readonly fallback?: number;
  /** What the number is, in place of `a whole number`: `a port`. */
  readonly noun?: string;
}

/** A {@link WholeNumberRange} with the option's name as the message gives it. */
export interface WholeNumberCheck extends WholeNumberRange {
  /** The option as the message names it: `breaker.openMs`, `--drain-delay (or TOLLGATE_DRAIN_DELAY)`. */
  readonly name: string;
}

/**
 * `value` when it is a safe integer in the range of `check` (its fallback when undefined);
 * otherwise an {@link InvalidOptionError} naming the option, the range, its meaning and the value.
 */
export function checkWholeNumber(value: unknown, check: WholeNumberCheck): number {
  if (value === undefined && check.fallback !== undefined) return check.fallback;
  if (typeof value === 'number' && inRange(value, check)) return value;
  throw outOfRange(check, value);
}

/**
 * {@link checkWholeNumber} for a number written as text (a command-line flag, an environment
 * variable): digits only, so `1e3`, `0x10`, ` 5` and `-1` are refused; the message quotes the text.
 */
export function checkWholeNumberText(text: string | undefined, check: WholeNumberCheck): number {
  if (text === undefined && check.fallback !== undefined) return check.fallback;
  // Number() alone would take "", " 5", "1e3" and "0x10".
  const value = text !== undefined && /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (inRange(value, check)) return value;
  throw outOfRange(check, text);
}

/**
 * Checks a module's numeric options from one table: each row's option is read with `given`,
 * named with `name` and checked with `check` ({@link checkWholeNumber}, or
 * {@link checkWholeNumberText} for flags). Returns the numbers by the table's keys.
 */
export function checkWholeNumbers<K extends string, V>(
  table: Readonly<Record<K, WholeNumberRange>>,
  given: (key: K) => V,
  name: (key: K) => string,
  check: (value: V, check: WholeNumberCheck) => number = checkWholeNumber,
): Record<K, number> {
  const numbers = {} as Record<K, number>;
  for (const key of Object.keys(table) as K[]) numbers[key] = check(given(key), { ...table[key], name: name(key) });
  return numbers;
}

function inRange(value: number, { min, max = Number.MAX_SAFE_INTEGER }: WholeNumberRange): boolean {
  return Number.isSafeInteger(value) && value >= min && value <= max;
}

function outOfRange({ name, min, max, unit, meaning, noun = 'a whole number' }: WholeNumberCheck, given: unknown): InvalidOptionError {
  const what = unit === undefined ? noun : `${noun} of ${unit}`;
  const range = max === undefined ? `≥ ${min}` : `from ${min} to ${max}`;
  return new InvalidOptionError(`${name} must be ${what} ${range}${meaning === undefined ? '' : ` (${meaning})`}, got ${describeValue(given)}`);
}

/**
 * A duration option (milliseconds, or a string such as `500ms` or `1m`: see duration.ts) in whole
 * milliseconds; otherwise an {@link InvalidOptionError} worded `<name> <what is wrong>`.
 */
export function checkDuration(value: unknown, name: string): number {
  const ms = parseDuration(value);
  if (typeof ms === 'string') throw new InvalidOptionError(`${name} ${ms}`);
  return ms;
}

/** A duration flag's bounds, in ms, and its value when left out. */
export interface DurationRange {
  /** The shortest allowed; 0 allows `0` (the limit off, or no delay). */
  readonly minMs: number;
  readonly maxMs: number;
  readonly fallbackMs: number;
}

/**
 * A duration given as text (a flag, a variable, a settings file): a number and its unit (`500ms`,
 * `30s`, `5m`), or `0` where `minMs` is 0. A bare number other than 0 is refused, as the gateway's
 * configuration refuses it: `15` meant 15 s to whoever wrote it and would be read as 15 ms.
 */
export function checkDurationText(text: string | undefined, name: string, range: DurationRange): number {
  if (text === undefined) return range.fallbackMs;
  const trimmed = text.trim();
  const zero = /^0+(ms|s|m|h|d|w)?$/.test(trimmed);
  if (!zero && /^\d+$/.test(trimmed)) {
    throw new InvalidOptionError(`${name} ${trimmed} has no unit: write it with one, "${trimmed}s" for seconds or "${trimmed}ms" for milliseconds`);
  }
  const ms = zero ? 0 : checkDuration(trimmed, name);
  if (ms < range.minMs || ms > range.maxMs) {
    throw new InvalidOptionError(`${name} must be a duration from ${range.minMs} ms to ${range.maxMs} ms, got ${JSON.stringify(text)}`);
  }
  return ms;
}

/** `value` when it is a function, undefined when left out; anything else is refused, naming the option. */
export function optionalFunction<T>(value: T | undefined, name: string): T | undefined {
  if (value === undefined || typeof value === 'function') return value;
  throw notAFunction(name, value);
}

/** `value` when it is a function; anything else, undefined included, is refused, naming the option. */
export function checkFunction<T>(value: unknown, name: string): T {
  if (typeof value === 'function') return value as T;
  throw notAFunction(name, value);
}

function notAFunction(name: string, value: unknown): InvalidOptionError {
  return new InvalidOptionError(`${name} must be a function, got ${describeValue(value)}`);
}
