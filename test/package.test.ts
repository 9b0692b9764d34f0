/**
 * Packaging smoke tests: the built package imports by its name through `exports`, and the `bin`
 * runs under plain `node`. (`npm test` builds dist/ first.)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
  bin: Record<string, string>;
};

function node(args: string[]) {
  return spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8' });
}

describe('built package', () => {
  it('imports as "tollgate" (ESM, through package.json exports) and decides', () => {
    const script = `
      import { createLimiter, memoryStore, TollgateError } from 'tollgate';
      const limiter = createLimiter({ store: memoryStore() });
      const policy = { algorithm: 'gcra', limit: 1, window: '1m' };
      const a = await limiter.limit('k', policy, { now: 0 });
      const b = await limiter.limit('k', policy, { now: 0 });
      console.log(JSON.stringify([a.allowed, b.allowed, b.retryAfter, typeof TollgateError]));
      await limiter.close();`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual([true, false, 60_000, 'function']);
  });

  it('imports "tollgate/client" (the SDK for callers) and reads rate-limit headers', () => {
    const script = `
      import { createClient, readRateLimit } from 'tollgate/client';
      const info = readRateLimit(new Headers({ 'ratelimit-policy': '"p";q=5;w=60', ratelimit: '"p";r=0;t=9', 'retry-after': '9' }), 0);
      console.log(JSON.stringify([typeof createClient({ pacing: true }).fetch, info]));`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual(['function', { limit: 5, windowMs: 60_000, remaining: 0, resetMs: 9_000, retryAfterMs: 9_000 }]);
  });

  it('the bin prints the package version', () => {
    const result = node([pkg.bin.tollgate!, '--version']);
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe(pkg.version);
  });

  it('the bin prints help with exit 0, and usage with exit 2 on an unknown command or flag', () => {
    const help = node([pkg.bin.tollgate!, '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/Usage: tollgate <command>/);
    const unknown = node([pkg.bin.tollgate!, 'frobnicate']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "frobnicate"/);
    const badFlag = node([pkg.bin.tollgate!, '--frob']);
    expect(badFlag.status).toBe(2);
    expect(badFlag.stderr).toMatch(/--frob/);
  });

  it.each(['help', 'help serve', 'serve --help', 'serve -h', 'serve --port 0 --help', 'validate --help', 'validate -h', 'demo --help'])(
    'tollgate %s prints the usage and exits 0 (never starts the service)',
    (line) => {
      const result = spawnSync(process.execPath, [pkg.bin.tollgate!, ...line.split(' ')], { cwd: root, encoding: 'utf8', timeout: 10_000 });
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(/^Usage: tollgate <command> \[options\]\n/);
      expect(result.stdout).toMatch(/ {2}serve {2}.*\n[^]* {2}validate PATH/);
      expect(result.status).toBe(0);
    },
  );

  it('the demo shows every algorithm admitting a burst and then throttling', () => {
    const result = node([pkg.bin.tollgate!, 'demo']);
    expect(result.status).toBe(0);
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'fixed-window', 'sliding-log', 'sliding-window', 'gcra']) {
      const line = result.stdout.split('\n').find((l) => l.startsWith(algorithm));
      expect(line, algorithm).toMatch(/t=0:ok\(4\).*t=40:ok\(0\) t=50:429\(\d+ms\)/);
    }
  });
});
