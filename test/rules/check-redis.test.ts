/**
 * decideCheck() on Redis: the same answers as on the memory store, as a promise (the store answers
 * over the network), through a real redis-server started for the suite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileRules } from '../../src/rules/ruleset.js';
import { parseRules } from '../../src/rules/parse/index.js';
import { createLimiter, memoryStore, redisStore, type Limiter } from '../../src/index.js';
import type { CheckRequest } from '../../src/rules/check.js';
import { useRedisServer } from '../support/redis-topologies.js';

const NOW = 1_700_000_000_000;
const RULES = `
domain: api
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;

describe('decideCheck() on Redis', () => {
  const server = useRedisServer();
  let limiter: Limiter;
  beforeAll(() => {
    // Exact answers, not deadlines: a loaded machine's slow reply must not be answered by the failure mode.
    limiter = createLimiter({ store: redisStore({ url: server.url }), rules: compileRules(parseRules(RULES, 'rules.yaml')), deadlineMs: 5_000 });
  });
  afterAll(async () => {
    await limiter?.close();
  });

  it('answers with a promise, the same sequence as the memory store', async () => {
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(RULES, 'rules.yaml')) });
    const checkRequest: CheckRequest = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'carol' }] }], now: NOW };
    const codes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const decided = limiter.decideCheck(checkRequest);
      expect(decided).toBeInstanceOf(Promise);
      const result = await decided;
      expect(result).toEqual(memory.decideCheck(checkRequest));
      codes.push(result.overallCode);
    }
    expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT']);
  });

  it('a request naming the same descriptor twice counts once, as on the memory store', async () => {
    const memory = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(RULES, 'rules.yaml')) });
    const descriptor = { entries: [{ key: 'user', value: 'dave' }] };
    const checkRequest: CheckRequest = { domain: 'api', descriptors: [descriptor, descriptor], now: NOW };
    const answers: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await limiter.decideCheck(checkRequest);
      expect(result).toEqual(memory.decideCheck(checkRequest));
      answers.push([result.overallCode, result.statuses.map((status) => status.limitRemaining)]);
    }
    // 2 a minute: two requests pass, each counted once.
    expect(answers).toEqual([
      ['OK', [1, 1]],
      ['OK', [0, 0]],
      ['OVER_LIMIT', [0, 0]],
    ]);
  });
});
