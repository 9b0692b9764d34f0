/**
 * The HTML report (`tollgate simulate --html`, on the example of docs/simulate.md, two algorithms
 * compared) in headless Chromium: it renders from the file alone (nothing fetched, no
 * console error, the CSP holds), names every rule and shows a bar per time bucket with the
 * throttled counts of the report. Skipped, with a warning, where Chromium is not installed.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { runSimulateCommand } from '../../src/simulate/command.js';

const CHROMIUM = '/usr/bin/chromium';
const EXAMPLES = join(import.meta.dirname, '../../examples/simulate');
const [RULES, LOG, MAP] = ['rules.yaml', 'access.log', 'map.yaml'].map((name) => join(EXAMPLES, name)) as [string, string, string];
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`simulate HTML browser test skipped: ${CHROMIUM} is missing (install Debian's chromium: apt-get install -y chromium)`);
const dir = mkdtempSync(join(tmpdir(), 'tollgate-simulate-html-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
}

describe.skipIf(!haveChromium)('the HTML report in headless Chromium', () => {
  it('renders the rules, their charts and busiest keys with no console error and nothing fetched', { timeout: 60_000 }, async () => {
    const file = join(dir, 'report.html');
    const args = ['--rules', RULES, '--log', LOG, '--map', MAP, '--algorithm', 'fixed-window,sliding-window', '--compare-to', 'sliding-log', '--html', file];
    const quiet = { write: () => true };
    expect(await runSimulateCommand(args, { stdout: quiet, stderr: quiet }, '')).toBe(0);
    expect(readFileSync(file, 'utf8')).not.toMatch(/<script|https?:\/\//);

    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      const problems: string[] = [];
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('console', (message) => {
        if (message.type() === 'error' || message.type() === 'warning') problems.push(`console: ${message.text()}`);
      });
      const requests: string[] = [];
      page.on('request', (request) => requests.push(request.url()));
      await page.goto(`file://${file}`);

      const runs = await page.$$eval('section.run', (sections) => sections.map((section) => section.getAttribute('data-algorithm')));
      expect(runs).toEqual(['fixed-window', 'sliding-window']);
      const headings = await page.$$eval('section.run[data-algorithm="sliding-window"] .rule h3', (items) => items.map((h) => h.textContent));
      expect(headings).toEqual(['api.remote_address', 'api.login_user']);
      const charts = await page.$$eval('svg.timeline', (svgs) =>
        svgs.map((svg) => ({
          buckets: Number(svg.getAttribute('data-buckets')),
          throttled: Number(svg.getAttribute('data-throttled-sum')),
          bars: svg.querySelectorAll('rect.throttled').length,
          visible: svg.getBoundingClientRect().width > 0 && svg.getBoundingClientRect().height > 0,
        })),
      );
      expect(charts).toEqual([
        { buckets: 2, throttled: 12, bars: 2, visible: true },
        { buckets: 2, throttled: 2, bars: 2, visible: true },
        { buckets: 2, throttled: 12, bars: 2, visible: true },
        { buckets: 2, throttled: 3, bars: 2, visible: true },
      ]);
      // The tallest throttled bar is drawn: its height is more than zero pixels.
      const tallest = await page.$$eval('svg.timeline rect.throttled', (rects) => Math.max(...rects.map((rect) => rect.getBoundingClientRect().height)));
      expect(tallest).toBeGreaterThan(0);
      const firstKey = await page.$eval('.rule[data-rule="api.remote_address"] table.top td', (td) => td.textContent);
      expect(firstKey).toBe('api|remote_address=198.51.100.7');
      expect(problems).toEqual([]);
      expect(requests).toEqual([`file://${file}`]);
    } finally {
      await browser.close();
    }
  });
});
