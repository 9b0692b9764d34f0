/**
 * docs/client.md: its example is examples/client/backoff-and-pacing.mjs, verbatim, and running that
 * file (a real process, against the built package) prints what the page says it prints.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const page = readFileSync(join(root, 'docs/client.md'), 'utf8');

describe('docs/client.md', () => {
  it('shows examples/client/backoff-and-pacing.mjs verbatim', () => {
    const blocks = [...page.matchAll(/<!-- example: (\S+) -->\n```\w*\n([^]*?)```\n/g)];
    expect(blocks.map((block) => block[1])).toEqual(['examples/client/backoff-and-pacing.mjs']);
    expect(blocks[0]![2]).toBe(readFileSync(join(root, blocks[0]![1]!), 'utf8'));
  });

  it('the example runs and prints the output shown', async () => {
    const shown = /<!-- output: node (\S+) -->\n```text\n([^]*?)```\n/.exec(page)!;
    const { stdout } = await promisify(execFile)(process.execPath, [shown[1]!], { cwd: root, timeout: 15_000 });
    expect(stdout).toBe(shown[2]);
  }, 20_000);

  it('is linked from the README', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8')).toMatch(/\]\(docs\/client\.md\)/);
  });
});
