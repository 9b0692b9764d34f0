import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import { checkDuration, checkFunction, checkWholeNumber, checkWholeNumberText, checkWholeNumbers, optionalFunction } from '../../src/options.js';

describe('whole-number options', () => {
  const range = { name: 'thing: size', min: 1, max: 100 };

  it.each([1, 50, 100])('takes %d', (value) => {
    expect(checkWholeNumber(value, range)).toBe(value);
  });

  it.each([
    [0, '0'],
    [101, '101'],
    [1.5, '1.5'],
    [Number.NaN, 'NaN'],
    ['5', '"5"'],
    [null, 'null'],
    [undefined, 'undefined'],
  ])('refuses %j, naming the option, the range and the value', (value, shown) => {
    expect(() => checkWholeNumber(value, range)).toThrow(new InvalidOptionError(`thing: size must be a whole number from 1 to 100, got ${shown}`));
  });

  it('takes the fallback only when the option is left out', () => {
    expect(checkWholeNumber(undefined, { ...range, fallback: 7 })).toBe(7);
    expect(() => checkWholeNumber(null, { ...range, fallback: 7 })).toThrow('got null');
  });

  it('words the unit, an open range and the meaning', () => {
    expect(() => checkWholeNumber(-1, { name: 'sweepMs', min: 0, unit: 'ms', meaning: '0 disables' })).toThrow(
      new InvalidOptionError('sweepMs must be a whole number of ms ≥ 0 (0 disables), got -1'),
    );
    expect(() => checkWholeNumber(2 ** 53, { name: 'n', min: 0 })).toThrow('n must be a whole number ≥ 0, got 9007199254740992');
    expect(() => checkWholeNumber(-1, { name: '--port', min: 0, max: 65_535, noun: 'a port' })).toThrow('--port must be a port from 0 to 65535, got -1');
  });

  it('reads flags as digits only, quoting the text it refuses', () => {
    expect(checkWholeNumberText('042', range)).toBe(42);
    expect(checkWholeNumberText(undefined, { ...range, fallback: 3 })).toBe(3);
    for (const text of ['', ' 5', '1e1', '0x10', '-1', '5.0', '101']) {
      expect(() => checkWholeNumberText(text, range)).toThrow(new InvalidOptionError(`thing: size must be a whole number from 1 to 100, got ${JSON.stringify(text)}`));
    }
  });

  it('checks a table in its order, each row named, and answers by its keys', () => {
    const table = { a: { min: 0, fallback: 1 }, b: { min: 5, max: 9, fallback: 6 } };
    expect(checkWholeNumbers(table, (key) => ({ b: 9 })[key as 'b'], (key) => `t.${key}`)).toEqual({ a: 1, b: 9 });
    expect(() => checkWholeNumbers(table, () => -1, (key) => `t.${key}`)).toThrow('t.a must be a whole number ≥ 0, got -1');
    expect(() => checkWholeNumbers(table, (key) => (key === 'b' ? 'x' : undefined), (key) => `--${key}`, checkWholeNumberText)).toThrow('--b must be a whole number from 5 to 9, got "x"');
  });
});

describe('duration and function options', () => {
  it('takes a duration in ms or as a string, and says what is wrong with another', () => {
    expect(checkDuration('2s', 'maxDelay')).toBe(2_000);
    expect(checkDuration(250, 'maxDelay')).toBe(250);
    expect(() => checkDuration('soon', 'maxDelay')).toThrow(new InvalidOptionError('maxDelay "soon" is not a duration: write a whole number and one unit of ms, s, m, h, d or w (e.g. "1m")'));
  });

  it('takes a function, or leaves an optional one out', () => {
    const f = (): void => undefined;
    expect(optionalFunction(f, 'onError')).toBe(f);
    expect(optionalFunction(undefined, 'onError')).toBeUndefined();
    expect(checkFunction(f, 'deliver')).toBe(f);
    expect(() => optionalFunction(42 as unknown as () => void, 'onError')).toThrow(new InvalidOptionError('onError must be a function, got 42'));
    expect(() => checkFunction(undefined, 'deliver')).toThrow(new InvalidOptionError('deliver must be a function, got undefined'));
  });
});
