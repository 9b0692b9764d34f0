/** Checking the function and name options of the deferred queue and the drain worker, once, at construction (numbers: options.ts). */
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkFunction } from '../../options.js';

/** `value` as a function, `fallback` when undefined (and no fallback means it is required). */
export function callback<T>(where: string, name: string, value: unknown, fallback?: T): T {
  if (value === undefined && fallback !== undefined) return fallback;
  return checkFunction<T>(value, `${where}: ${name}`);
}

/** `value` as a non-empty string of at most `maxLength` characters matching `pattern`. */
export function shortName(where: string, name: string, value: unknown, fallback: string | undefined, pattern: RegExp, what: string): string {
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'string' || !pattern.test(value)) throw new InvalidOptionError(`${where}: ${name} must be ${what}, got ${describeValue(value)}`);
  return value;
}

/** An object of optional callbacks (metrics hooks): each named one must be a function. */
export function hooksOption<T extends object>(where: string, value: unknown, names: readonly string[]): Partial<T> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(`${where}: hooks must be an object of functions, got ${describeValue(value)}`);
  for (const [name, hook] of Object.entries(value)) {
    if (!names.includes(name)) throw new InvalidOptionError(`${where}: unknown hook ${JSON.stringify(name)}; the hooks are ${names.join(', ')}`);
    checkFunction(hook, `${where}: hooks.${name}`);
  }
  return value as Partial<T>;
}

/** Calls a metrics hook; a hook that throws must not stop the queue, so its error is dropped. */
export function callHook<A extends unknown[]>(hook: ((...args: A) => void) | undefined, ...args: A): void {
  if (hook === undefined) return;
  try {
    hook(...args);
  } catch {
    // A broken metrics exporter is not a reason to lose or stall a deferred request.
  }
}
