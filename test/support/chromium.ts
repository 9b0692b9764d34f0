/**
 * Headless Chromium for the dashboard's browser tests (playwright-core drives Debian's
 * /usr/bin/chromium; the tests are skipped where it is missing), and where screenshots go.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/** Screenshots taken by the tests, to look at. */
export const ARTIFACTS = join(process.cwd(), 'test-artifacts');

export const haveChromium = existsSync(CHROMIUM);
if (!haveChromium) console.warn(`dashboard browser test skipped: ${CHROMIUM} is missing (install Debian's chromium: apt-get install -y chromium)`);

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Page errors, console errors and CSP reports, as they come. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' || /Content.Security.Policy/i.test(message.text())) problems.push(`console: ${message.text()}`);
  });
  return problems;
}
