/**
 * docs/concurrency.md: its example is examples/concurrency/slots.mjs verbatim, and running it prints
 * what the page says it prints.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const page = readFileSync(join(root, 'docs/concurrency.md'), 'utf8');

describe('docs/concurrency.md', () => {
  it('shows examples/concurrency/slots.mjs verbatim', () => {
    const block = /<!-- example: (\S+) -->\n```js\n([^]*?)```\n/.exec(page);
    expect(block?.[1]).toBe('examples/concurrency/slots.mjs');
    expect(block?.[2]).toBe(readFileSync(join(root, block![1]!), 'utf8'));
  });

  it('the example prints what the page says (needs dist/: npm run build)', () => {
    const expected = /<!-- output -->\n```\n([^]*?)```\n/.exec(page)?.[1];
    const run = spawnSync(process.execPath, ['examples/concurrency/slots.mjs'], { cwd: root, encoding: 'utf8', timeout: 20_000 });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(expected);
    expect(run.status).toBe(0);
  });
});
