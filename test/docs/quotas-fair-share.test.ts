/**
 * docs/quotas.md section 5: examples/quotas/fair-share.mjs, run as a user runs it (needs dist/:
 * npm run build), prints what the page says it prints.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const run = promisify(execFile);
const ROOT = new URL('../..', import.meta.url).pathname;

it('the fair-share recipe prints what docs/quotas.md says (needs dist/: npm run build)', async () => {
  const page = readFileSync(`${ROOT}docs/quotas.md`, 'utf8');
  const section = page.slice(page.indexOf('## 5. Fair shares'), page.indexOf('## 6.'));
  const printed = /prints:\n\n```text\n([\s\S]*?)```/.exec(section)![1];
  const { stdout } = await run(process.execPath, ['examples/quotas/fair-share.mjs'], { cwd: ROOT });
  expect(stdout).toBe(printed);
});

it('the rules of the fair-share recipe load, each customer value a tenant of one group', async () => {
  const { checkRules } = await import('../../src/rules/parse/index.js');
  const page = readFileSync(`${ROOT}docs/quotas.md`, 'utf8');
  const section = page.slice(page.indexOf('## 5. Fair shares'), page.indexOf('## 6.'));
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
  expect(checkRules(yaml, 'quotas.yaml').errors).toEqual([]);
});
