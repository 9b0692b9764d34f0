/**
 * The Lua scripts name the numbers of the wire format (algorithm codes, op codes, reason codes) as
 * constants; each must equal the TypeScript value the store sends or reads (no Redis needed).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALGORITHM_CATALOG } from '../../../src/algorithms/catalog.js';
import { POLICY_RANGES } from '../../../src/policy.js';
import * as protocol from '../../../src/store/redis/protocol.js';

const SCRIPTS = new URL('../../../src/store/redis/scripts/', import.meta.url);
const sources = Object.fromEntries(
  readdirSync(SCRIPTS)
    .filter((name) => name.endsWith('.lua'))
    .map((name) => [name, readFileSync(new URL(name, SCRIPTS), 'utf8')]),
);

/** Every `local NAME[, NAME ...] = 1[, 2 ...]` of the scripts whose names are all in capitals. */
function luaConstants(): Record<string, number> {
  const constants: Record<string, number> = {};
  for (const [file, source] of Object.entries(sources)) {
    for (const match of source.matchAll(/^local ([A-Z_][A-Z0-9_]*(?:, *[A-Z_][A-Z0-9_]*)*) = (-?\d+(?:, *-?\d+)*)\s*$/gm)) {
      const names = match[1]!.split(/, */);
      const values = match[2]!.split(/, */).map(Number);
      expect(values, `${file}: ${match[0]}`).toHaveLength(names.length);
      names.forEach((name, i) => {
        expect(constants, `${name} is defined twice`).not.toHaveProperty(name);
        constants[name] = values[i]!;
      });
    }
  }
  return constants;
}

/** The TypeScript value of each constant the scripts must define. */
const expected: Record<string, number> = {
  ...Object.fromEntries(ALGORITHM_CATALOG.map((entry) => [entry.name.toUpperCase().replaceAll('-', '_'), entry.code])),
  OP_CONSUME: protocol.OP_CONSUME,
  OP_PEEK: protocol.OP_PEEK,
  OP_RESET: protocol.OP_RESET,
  OP_ADD: protocol.OP_ADD,
  REASON_NONE: protocol.REASON_NONE,
  REASON_COST_EXCEEDS_CAPACITY: protocol.REASON_COST_EXCEEDS_CAPACITY,
  REASON_BLOCKED: protocol.REASON_BLOCKED,
  REASON_BLOCK_STARTED: protocol.REASON_BLOCK_STARTED,
  MAX_BLOCK: POLICY_RANGES.blockDuration.max,
  MAX_PRECISION: POLICY_RANGES.precision.max,
  REASON_WRONG_TYPE: protocol.REASON_WRONG_TYPE,
  REASON_CORRUPT_STATE: protocol.REASON_CORRUPT_STATE,
  REASON_CLOCK_OUTSIDE_PERIODS: protocol.REASON_CLOCK_OUTSIDE_PERIODS,
  MAX_INTEGER: Number.MAX_SAFE_INTEGER,
  MAX_REPLAY_LAG: protocol.REPLAY_MAX_LAG_MS,
  REPLAY_SLACK: protocol.REPLAY_SLACK_MS,
  CALLER_CLOCK_SLACK: protocol.CALLER_CLOCK_SLACK_MS,
  ARGS_ON_REDIS_TIME: protocol.SINGLE_ARGS_ON_REDIS_TIME,
  ARGS_ON_CALLER_CLOCK: protocol.SINGLE_ARGS_ON_CALLER_CLOCK,
  // Lua's own, no TypeScript counterpart: how many parsed policies single.lua holds per library load.
  POLICY_CACHE_SIZE: 256,
};

describe('the Redis script protocol', () => {
  it('names every algorithm, op and reason code in Lua with the value TypeScript uses', () => {
    expect(luaConstants()).toEqual(expected);
  });

  it('sends each algorithm its catalog code; the codes run 1..n, as decide.lua validates them', () => {
    const codes = ALGORITHM_CATALOG.map((entry) => protocol.ALGORITHM_CODES[entry.name]);
    expect(codes).toEqual(ALGORITHM_CATALOG.map((entry) => entry.code));
    expect([...codes].sort((a, b) => a - b)).toEqual(codes.map((_, i) => i + 1));
    expect(sources['decide.lua']).toContain('integer_arg(index, TOKEN_BUCKET, GCRA)');
    expect(sources['decide.lua']).toContain('integer_arg(index + 1, OP_CONSUME, OP_ADD)');
  });

  it('compares algorithms and ops by name in Lua, never by bare number', () => {
    for (const [file, source] of Object.entries(sources)) {
      expect(source, file).not.toMatch(/\b(a|algorithm|op)\s*[~=]=\s*\d/);
    }
  });

  it("documents each algorithm's code in decide.lua's header", () => {
    for (const entry of ALGORITHM_CATALOG) expect(sources['decide.lua']).toContain(`${entry.code} ${entry.name}`);
  });
});
