/**
 * docs/deferred.md: its example is examples/deferred/drain.mjs verbatim, and running it (against a
 * Redis this file starts) prints what the page says it prints.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useRedisServer } from '../../support/redis-topologies.js';

const root = new URL('../../..', import.meta.url).pathname;
const page = readFileSync(join(root, 'docs/deferred.md'), 'utf8');

const redis = useRedisServer();

describe('docs/deferred.md', () => {
  it('shows examples/deferred/drain.mjs verbatim', () => {
    const block = /<!-- example: (\S+) -->\n```js\n([^]*?)```\n/.exec(page);
    expect(block?.[1]).toBe('examples/deferred/drain.mjs');
    expect(block?.[2]).toBe(readFileSync(join(root, block![1]!), 'utf8'));
  });

  it('the example prints what the page says (needs dist/: npm run build)', () => {
    const expected = /<!-- output -->\n```\n([^]*?)```\n/.exec(page)?.[1];
    const run = spawnSync(process.execPath, ['examples/deferred/drain.mjs'], { cwd: root, encoding: 'utf8', timeout: 20_000, env: { ...process.env, REDIS_URL: redis.url } });
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(expected);
    expect(run.status).toBe(0);
  });
});
