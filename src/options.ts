/**
 * Option objects, checked the same way everywhere: something other than a plain object is refused
 * with an example, and a misspelt option (`windw`, `maxkeys`) is refused with the names that exist,
 * never ignored.
 */
import { InvalidOptionError, describeValue } from './errors.js';

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
