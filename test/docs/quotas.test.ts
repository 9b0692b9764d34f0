/**
 * docs/quotas.md, sections 1, 2, 4 and 6: every file it shows is the file in examples/ verbatim,
 * every script prints what the page says, and every `<!-- run -->` shell block, run in order by
 * bash against a real service on the guide's rules (`tollgate` being the built CLI), prints its
 * `# ` lines (instants, which depend on today, compared as <time>). Needs dist/: npm run build.
 */
import { execFile, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { inProcessServiceForSuite } from '../support/in-process-service.js';

const root = new URL('../..', import.meta.url).pathname;
const page = readFileSync(join(root, 'docs/quotas.md'), 'utf8');
const TOKEN = 'quotas-guide-admin-token-0123456789';

/** The page's sections this file tests (3 and 5 have tests of their own). */
const SECTIONS = ['1', '2', '4', '6'];
const section = (number: string): string => {
  const start = page.indexOf(`\n## ${number}. `);
  const end = page.indexOf('\n## ', start + 1);
  return page.slice(start, end === -1 ? undefined : end);
};
const tested = SECTIONS.map(section).join('\n');

/** ISO instants (with or without ms) as <time>: periods and expiries depend on the day the test runs. */
const masked = (text: string): string => text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z/g, '<time>');

const suite = inProcessServiceForSuite({ config: 'examples/quotas/plans.yaml', 'admin-token': TOKEN });
let bin: string;

beforeAll(() => {
  bin = mkdtempSync(join(tmpdir(), 'tollgate-quotas-guide-'));
  writeFileSync(join(bin, 'tollgate'), `#!/bin/sh\nexec "${process.execPath}" "${join(root, 'dist/cli/main.js')}" "$@"\n`);
  chmodSync(join(bin, 'tollgate'), 0o755);
});

describe('docs/quotas.md (sections 1, 2, 4, 6)', () => {
  it('shows each example file verbatim', () => {
    const blocks = [...tested.matchAll(/<!-- example: (\S+) -->\n```\w+\n([^]*?)```\n/g)];
    expect(blocks.map((block) => block[1])).toEqual(['examples/quotas/plans.yaml', 'examples/quotas/calendar.mjs', 'examples/quotas/usage.mjs', 'examples/quotas/acme-override.yaml', 'examples/quotas/hierarchy.mjs']);
    for (const [, file, text] of blocks) expect(text, file).toBe(readFileSync(join(root, file!), 'utf8'));
  });

  it('each script prints what the page says', () => {
    const outputs = [...tested.matchAll(/<!-- output: node (\S+) -->\n```text\n([^]*?)```\n/g)];
    expect(outputs).toHaveLength(3);
    for (const [, file, shown] of outputs) {
      const run = spawnSync(process.execPath, [file!], { cwd: root, encoding: 'utf8', timeout: 20_000 });
      expect(run.stderr, file).toBe('');
      expect(run.stdout, file).toBe(shown);
      expect(run.status).toBe(0);
    }
  }, 60_000);

  it('each shell block prints its # lines, run in order against a service on the rules', async () => {
    // Section 2 reads Acme's usage after three calls.
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`http://127.0.0.1:${suite.service.httpPort!}/v1/check`, { method: 'POST', body: JSON.stringify({ domain: 'plans', descriptors: [{ plan: 'pro', customer: 'acme' }] }) });
      expect(response.status).toBe(200);
    }
    const blocks = [...tested.matchAll(/<!-- run -->\n```sh\n([^]*?)```\n/g)].map((block) => block[1]!);
    expect(blocks).toHaveLength(3);
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, TOLLGATE_ADMIN_URL: suite.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN };
    for (const block of blocks) {
      // A command, then the lines it prints as `# ` comments.
      const steps: { command: string; shown: string }[] = [];
      for (const line of block.split('\n').filter((text) => text !== '')) {
        if (line.startsWith('# ')) steps.at(-1)!.shown += `${line.slice(2)}\n`;
        else steps.push({ command: line, shown: '' });
      }
      for (const { command, shown } of steps) {
        // Not spawnSync: the service answering the command runs in this process.
        const run = await new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
          execFile('bash', ['-c', command], { cwd: root, env, timeout: 20_000 }, (error, stdout, stderr) => resolve({ status: error === null ? 0 : Number((error as { code?: number }).code ?? NaN), stdout, stderr }));
        });
        expect(run.stderr, command).toBe('');
        expect(masked(run.stdout), command).toBe(masked(shown));
        expect(run.status, command).toBe(0);
      }
    }
  }, 90_000);
});
