/**
 * A descriptor's `ledger:` (docs/rules.md): read as `true` or `{ period, time_zone, keep, refused,
 * ids }`, it reaches the limiter — a rules check records the descriptor's limit in the usage ledger,
 * a request id billed once — and every misuse is refused at its file:line:col.
 */
import { describe, expect, it } from 'vitest';
import { createLimiter, memoryStore } from '../../src/index.js';
import { checkRules, parseRules } from '../../src/rules/parse/index.js';
import { compileRules } from '../../src/rules/ruleset.js';

const rules = (ledger: string, rateLimit = '{ unit: day, requests_per_unit: 2, calendar: true }'): string => `domain: api
descriptors:
  - key: customer
    rate_limit: ${rateLimit}
    ledger: ${ledger}
`;

const NOW = Date.parse('2027-11-02T10:00:00Z');

describe('rules: ledger', () => {
  it('a descriptor with ledger: records what its limit admits and refuses per key and period; a request id is billed once', async () => {
    const yaml = rules('{ period: month, time_zone: Europe/Paris, keep: 13, refused: true, ids: 100 }');
    const [domain] = parseRules(yaml, 'api.yaml');
    expect(domain!.descriptors[0]!.ledger).toEqual({ period: 'month', timeZone: 'Europe/Paris', keep: 13, refused: true, ids: 100 });
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(yaml, 'api.yaml'), [yaml]) });
    const request = (requestId?: string) => limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'customer', value: 'acme' }] }], now: NOW, ...(requestId === undefined ? {} : { requestId }) });
    expect((await request('a')).overallCode).toBe('OK');
    expect((await request('a')).overallCode).toBe('OK');
    expect((await request('b')).overallCode).toBe('OVER_LIMIT');
    const rows = [];
    for await (const row of limiter.ledger.export({ period: '2027-11', timeZone: 'Europe/Paris', now: NOW })) rows.push(row);
    expect(rows).toEqual([{ key: 'api|customer=acme', period: '2027-11', periodStart: Date.parse('2027-10-31T23:00:00Z'), periodEnd: Date.parse('2027-11-30T23:00:00Z'), admitted: 1, refused: 1 }]);
    await limiter.close();
  });

  it('ledger: true takes the calendar window of its limit as the period', async () => {
    const yaml = rules('true');
    const limiter = createLimiter({ store: memoryStore({ sweepIntervalMs: 0 }), rules: compileRules(parseRules(yaml, 'api.yaml'), [yaml]) });
    await limiter.check({ domain: 'api', descriptors: [{ entries: [{ key: 'customer', value: 'acme' }] }], now: NOW });
    const rows = [];
    for await (const row of limiter.ledger.export({ period: '2027-11-02', now: NOW })) rows.push(row);
    expect(rows).toMatchObject([{ key: 'api|customer=acme', admitted: 1 }]);
    await limiter.close();
  });

  it.each([
    ['{ keep: 0 }', undefined, 'led.yaml:5:21: descriptors[0].ledger.keep: keep must be a whole number ≥ 1, got 0'],
    ['{ keep: 5000 }', undefined, 'led.yaml:5:13: descriptors[0].ledger: ledger.keep must be a whole number from 1 to 1000, got 5000'],
    ['{ period: fortnight }', undefined, 'led.yaml:5:13: descriptors[0].ledger: ledger.period must be one of day, week, month, quarter, year, got "fortnight"'],
    ['{ time_zone: Mars/Olympus }', undefined, 'led.yaml:5:13: descriptors[0].ledger: ledger.time_zone "Mars/Olympus" is not a time zone this Node.js knows'],
    ['{ refused: sometimes }', undefined, 'led.yaml:5:24: descriptors[0].ledger.refused: refused must be true or false, got "sometimes"'],
    ['{ bill: true }', undefined, 'led.yaml:5:15: descriptors[0].ledger.bill'],
    ['monthly', undefined, 'led.yaml:5:13: descriptors[0].ledger: ledger must be true or false, got "monthly"'],
    ['true', '{ unlimited: true }', 'led.yaml:5:5: descriptors[0].ledger: ledger records what a rate_limit admits; add a rate_limit (not unlimited) to this descriptor, or remove ledger'],
  ])('ledger: %s is refused at its place', (ledger, rateLimit, problem) => {
    const messages = checkRules(rules(ledger, rateLimit), 'led.yaml').errors.map((error) => error.message);
    expect(messages.join('\n')).toContain(problem);
  });
});
