/**
 * The dashboard in headless Chromium with the traffic that used to be invisible: `/v1/limit`
 * decisions, checks of an unknown domain, checks of several descriptors, a blocked entry. The
 * headline cards add up (checks = allowed + throttled checks; decisions = allowed + over-limit
 * decisions), latency is shown, and the page is kept as a screenshot (test-artifacts/).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { ARTIFACTS, haveChromium, launchChromium, watchProblems } from '../../support/chromium.js';
import { decisionUrl, observabilityUrl, postJson } from '../../support/observability.js';

const TOKEN = 'dashboard-visibility-token';

// The functions given to the page run in the browser; the project is type-checked without the DOM
// library, so the browser globals they use are declared here (in this module only).
declare const document: { getElementById(id: string): { getAttribute(name: string): string | null } | null };
type HTMLElement = { hidden: boolean };

const post = (service: RunningService, path: string, body: unknown): Promise<number> => postJson(decisionUrl(service, path), body);

/** A few seconds of mixed traffic; returns what was sent. */
async function traffic(service: RunningService): Promise<{ checks: number; throttledChecks: number; limitCalls: number; unknown: number }> {
  expect(await postJson(observabilityUrl(service, '/v1/keys/block'), { key: 'remote_address=198.51.100.66', ttlMs: 60_000 }, { authorization: `Bearer ${TOKEN}` })).toBe(200);
  const sent = { checks: 0, throttledChecks: 0, limitCalls: 0, unknown: 0 };
  const count = (status: number): void => {
    sent.checks += 1;
    if (status === 429) sent.throttledChecks += 1;
  };
  for (let round = 0; round < 3; round++) {
    // Logins: 5 a minute per user, so the 6th to 8th of each user are throttled.
    for (let i = 0; i < 8; i++) count(await post(service, '/v1/check', { domain: 'classic', descriptors: [{ action: 'login', user: `user-${round}` }] }));
    // Two descriptors a check: two decisions each.
    for (let i = 0; i < 6; i++) count(await post(service, '/v1/check', { domain: 'hybrid', descriptors: [{ user_id: `u-${round}-${i}` }, { remote_address: '198.51.100.7' }] }));
    for (let i = 0; i < 4; i++) {
      count(await post(service, '/v1/limit', { key: `api-key:${round}`, policy: { algorithm: 'token-bucket', limit: 2, window: '1m' } }));
      sent.limitCalls += 1;
    }
    for (let i = 0; i < 3; i++) {
      count(await post(service, '/v1/check', { domain: 'ratelimit-typo', descriptors: [{ remote_address: '198.51.100.9' }] }));
      sent.unknown += 1;
    }
    count(await post(service, '/v1/check', { domain: 'per_ip', descriptors: [{ remote_address: '198.51.100.66' }] }));
    await new Promise((resolve) => setTimeout(resolve, 600));
  }
  return sent;
}

describe.skipIf(!haveChromium)('dashboard in headless Chromium: nothing invisible', () => {
  let service: RunningService;

  beforeAll(async () => {
    service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', 'admin-token': TOKEN }, {}));
  });
  afterAll(async () => {
    await service.close();
  });

  it('shows cards that add up, /v1/limit and unknown-domain traffic, latency, and no blocked key', { timeout: 60_000 }, async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 1200 } });
      const problems = watchProblems(page);
      await page.goto(observabilityUrl(service, '/dashboard'));
      await page.waitForFunction(() => document.getElementById('connection')?.getAttribute('data-value') === 'live');

      const sent = await traffic(service);
      await page.waitForFunction((checks) => Number(document.getElementById('checks-total')?.getAttribute('data-value')) === checks, sent.checks, { timeout: 10_000 });
      const numbers = await page.$$eval('[data-value]', (elements) => Object.fromEntries(elements.filter((el) => el.id !== '').map((el) => [el.id, Number(el.getAttribute('data-value'))])));

      // Checks (requests): the totals and the last second both add up.
      expect(numbers['checks-total']).toBe(sent.checks);
      expect(numbers['throttled-checks-total']).toBe(sent.throttledChecks);
      expect(numbers['allowed-checks-total']! + numbers['throttled-checks-total']!).toBe(numbers['checks-total']);
      expect(numbers['rate-allowed-checks']! + numbers['rate-throttled-checks']!).toBe(numbers['rate-checks']);
      // Decisions: 3 × (8 logins + 12 hybrid + 4 /v1/limit + 1 blocked); throttled: 3 logins, 2 /v1/limit, 1 blocked a round.
      expect(numbers['decisions-total']).toBe(3 * (8 + 12 + 4 + 1));
      expect(numbers['throttled-total']).toBe(3 * (3 + 2 + 1));
      expect(numbers['allowed-total']! + numbers['throttled-total']!).toBe(numbers['decisions-total']);
      expect(numbers['rate-allowed']! + numbers['rate-throttled']!).toBe(numbers['rate-decisions']);
      // The traffic that used to be invisible.
      expect(numbers['limit-api-total']).toBe(sent.limitCalls);
      expect(numbers['unknown-total']).toBe(sent.unknown);
      expect(await page.$$eval('#unknown-domains li', (items) => items.map((li) => [li.querySelector('code')?.textContent, li.getAttribute('data-value')]))).toEqual([['ratelimit-typo', String(sent.unknown)]]);
      const limitRow = page.locator('#rules-body tr[data-rule="(v1/limit)"]');
      expect(await limitRow.locator('td[data-col="allowed"]').getAttribute('data-value')).toBe('6');
      expect(await limitRow.locator('td[data-col="throttled"]').getAttribute('data-value')).toBe('6');
      // Latency: p50 and p99 in ms, p99 no smaller.
      expect(await page.$eval('#latency-p50', (el) => el.textContent)).toMatch(/^\d+(\.\d+)?$/);
      expect(numbers['latency-p99']).toBeGreaterThanOrEqual(numbers['latency-p50']!);
      // The blocked entry is counted under the rule "blocked", never listed as a key.
      const keys = await page.$$eval('#top-keys li code', (items) => items.map((code) => code.textContent));
      expect(keys).not.toContain('blocked');
      expect(keys.length).toBeGreaterThan(0);
      // One process: no worker table.
      expect(await page.$eval('#workers', (el) => (el as HTMLElement).hidden)).toBe(true);

      mkdirSync(ARTIFACTS, { recursive: true });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-visibility.png'), fullPage: true });
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
