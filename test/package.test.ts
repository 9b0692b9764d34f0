/**
 * Packaging smoke tests: the built package imports by its name through `exports`, and the `bin`
 * runs under plain `node`. (`npm test` builds dist/ first.)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
  bin: Record<string, string>;
  exports: Record<string, string | Record<'import' | 'require', { types: string; default: string }>>;
};

/** Every file an entry point names, for both formats: its types and its module. */
const exportedFiles = (): string[] =>
  Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target).flatMap((format) => [format.types, format.default])));

/**
 * The values each entry point exports, sorted: the public API. A change here is a change for every
 * user, so it is made on purpose and told in docs/migrating.md. `tollgate` holds the factories a
 * user calls and the typed errors (types cost nothing at run time and are not listed).
 */
const RUNTIME_EXPORTS: Record<string, string[]> = {
  '.': [
    'InvalidCheckError', 'InvalidCostError', 'InvalidKeyError', 'InvalidOptionError', 'InvalidPolicyError', 'InvalidTimeError', 'RulesError',
    'StoreDataError', 'StoreError', 'StoreUnavailableError', 'TollgateError',
    'compilePolicy', 'createLimiter', 'loadRules', 'memcachedStore', 'memoryStore', 'redisStore', 'regionStore', 'startReplicator',
  ],
  './rules': ['MAX_OVERRIDES', 'OverridesSync', 'RulesHolder', 'RulesSync', 'compileRules', 'parseRules', 'watchRules'],
  './http': [
    'HttpRateLimiter', 'QUOTA_EXCEEDED_TYPE', 'byApiKey', 'byHeader', 'byIp', 'byJwt', 'clientIp', 'limitedBody', 'normalizeIp', 'rateLimit',
    'rateLimitHeaders',
  ],
  './fastify': ['default', 'rateLimitHook', 'tollgate'],
  './hono': ['rateLimiter'],
  './express-rate-limit': ['TollgateStore'],
  './client': ['CLIENT_DEFAULTS', 'createClient', 'parseRetryAfter', 'rateLimitedFetch', 'readRateLimit'],
  './deferred': ['IDEMPOTENCY_HEADER', 'TICKET_HEADER', 'createDeferredQueue', 'startDrainWorker', 'upstreamDeliverer'],
  './simulate': [
    'InvalidLogError', 'LOG_FORMATS', 'checkMapping', 'detectFormat', 'jsonFieldMap', 'loadDomainConfigs', 'mappingFromFlags', 'parseMapping',
    'readAccessLog', 'readMappingFile', 'renderHtml', 'renderText', 'simulate',
  ],
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

  it('the bin prints help with exit 0, and a two-line error with exit 2 on an unknown command or flag', () => {
    const help = node([pkg.bin.tollgate!, '--help']);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: tollgate <command> \[options\]\n[^]* {2}serve {2}.*\n[^]* {2}validate PATH/);
    const unknown = node([pkg.bin.tollgate!, 'serv']);
    expect([unknown.status, unknown.stderr]).toEqual([2, 'tollgate: unknown command "serv" (did you mean serve?)\nsee tollgate --help\n']);
    const badFlag = node([pkg.bin.tollgate!, '--frob']);
    expect([badFlag.status, badFlag.stderr]).toEqual([2, 'tollgate: unknown flag --frob\nsee tollgate --help\n']);
  });

  // Each command's own help, never the global one; 'serve --port 0 --help' must not start the service.
  it.each([
    ['help serve', 'serve'],
    ['serve --help', 'serve'],
    ['serve -h', 'serve'],
    ['serve --port 0 --help', 'serve'],
    ['gateway --help', 'gateway'],
    ['validate --help', 'validate'],
    ['validate -h', 'validate'],
    ['simulate --help', 'simulate'],
    ['replicate --help', 'replicate'],
    ['demo --help', 'demo'],
  ])('tollgate %s prints the usage of %s and exits 0', (line, command) => {
    const result = spawnSync(process.execPath, [pkg.bin.tollgate!, ...line.split(' ')], { cwd: root, encoding: 'utf8', timeout: 20_000 });
    expect(result.stderr).toBe('');
    expect(result.stdout).toMatch(new RegExp(`^Usage: tollgate ${command} `));
    expect(result.stdout).not.toContain('Commands:');
    expect(result.status).toBe(0);
  });

  it('the demo shows every algorithm admitting a burst and then throttling', () => {
    const result = node([pkg.bin.tollgate!, 'demo']);
    expect(result.status).toBe(0);
    for (const algorithm of ['token-bucket', 'leaky-bucket', 'fixed-window', 'sliding-log', 'sliding-window', 'gcra']) {
      const line = result.stdout.split('\n').find((l) => l.startsWith(algorithm));
      expect(line, algorithm).toMatch(/t=0:ok\(4\).*t=40:ok\(0\) t=50:429\(\d+ms\)/);
    }
  });
});

describe('the packed tarball (what `npm pack` and `npm publish` ship)', () => {
  const work = mkdtempSync(join(tmpdir(), 'tollgate-pack-'));
  let files: string[] = [];
  let unpacked = '';
  /** An app with the tarball installed as node_modules/tollgate. */
  const app = join(work, 'app');
  beforeAll(() => {
    // `npm pack` runs `prepack`, which leaves the dist/ `npm test` built alone.
    const output = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    const [packed] = JSON.parse(output) as { filename: string; files: { path: string }[] }[];
    files = packed!.files.map((file) => file.path);
    unpacked = join(work, 'package');
    execFileSync('tar', ['-xzf', join(work, packed!.filename), '-C', work], { timeout: 30_000 });
    // The unpacked package resolves its dependencies from this checkout's node_modules, as if installed.
    symlinkSync(join(root, 'node_modules'), join(unpacked, 'node_modules'));
    mkdirSync(join(app, 'node_modules'), { recursive: true });
    symlinkSync(unpacked, join(app, 'node_modules', pkg.name));
  }, 90_000);
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('holds the bin, every export with its types, the docs, LICENSE and README', () => {
    const exported = exportedFiles();
    const docs = readdirSync(join(root, 'docs'), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(root, join(entry.parentPath, entry.name)).replaceAll('\\', '/'));
    for (const path of [pkg.bin.tollgate!, ...exported, ...docs, 'LICENSE', 'README.md', 'package.json']) {
      expect(files, path).toContain(path.replace(/^\.\//, ''));
    }
    expect(files.filter((path) => path.endsWith('.d.ts')).length).toBeGreaterThan(50);
  });

  it('leaves out the sources, tests, benchmarks, deploy files and scripts, and ships nothing that points at them', () => {
    expect(files.filter((path) => /^(src|test|tests|bench|deploy|scripts|node_modules)\//.test(path))).toEqual([]);
    expect(files.filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))).toEqual([]);
    // Source maps would point at src/, which is not shipped.
    expect(files.filter((path) => path.endsWith('.map'))).toEqual([]);
    // No script runs when the tarball is installed (prepack builds dist/ before packing and for git installs).
    const shipped = JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    expect(Object.keys(shipped.scripts ?? {}).filter((name) => ['preinstall', 'install', 'postinstall', 'prepare'].includes(name))).toEqual([]);
    // Every examples/ file the shipped docs cite is shipped.
    const cited = new Set(files.filter((path) => path.startsWith('docs/')).flatMap((path) => readFileSync(join(unpacked, path), 'utf8').match(/examples\/[\w./-]+\.\w+/g) ?? []));
    // (Only our own: docs/rules.md also names a file of envoy's repository, examples/ratelimit/.)
    const ours = [...cited].filter((path) => existsSync(join(root, path.split('/').slice(0, 2).join('/'))));
    expect(ours.length).toBeGreaterThan(5);
    expect(ours.filter((path) => !files.includes(path))).toEqual([]);
  });

  it('declares its license, repository and npm provenance; the LICENSE is MIT', () => {
    const shipped = JSON.parse(readFileSync(join(unpacked, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(shipped.license).toBe('MIT');
    expect(shipped.publishConfig).toEqual({ provenance: true });
    expect((shipped.repository as { url: string }).url).toMatch(/^git\+https:\/\//);
    expect(shipped.engines).toEqual({ node: '>=20' });
    const license = readFileSync(join(unpacked, 'LICENSE'), 'utf8');
    expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 Tollgate contributors\n/);
  });

  it('its bin is JavaScript with a node shebang, and runs from the tarball', () => {
    const bin = join(unpacked, pkg.bin.tollgate!);
    expect(readFileSync(bin, 'utf8').split('\n')[0]).toBe('#!/usr/bin/env node');
    const version = spawnSync(process.execPath, [bin, '--version'], { encoding: 'utf8', timeout: 10_000 });
    expect([version.status, version.stdout.trim()]).toEqual([0, pkg.version]);
  });

  it('an app with the tarball installed imports it by name and decides', () => {
    const script = `
      import { createLimiter, memoryStore } from 'tollgate';
      import { readRateLimit } from 'tollgate/client';
      const limiter = createLimiter({ store: memoryStore() });
      const decision = await limiter.limit('k', { algorithm: 'fixed-window', limit: 1, window: '1s' }, { now: 0 });
      console.log(JSON.stringify([decision.allowed, typeof readRateLimit, import.meta.resolve('tollgate').includes('/package/dist/')]));
      await limiter.close();`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, encoding: 'utf8', timeout: 10_000 });
    expect(JSON.parse(output)).toEqual([true, 'function', true]);
  });

  it('each entry point exports exactly its pinned values, and there is no other entry point', () => {
    const entries = Object.keys(pkg.exports).filter((path) => path !== './package.json');
    expect(entries.sort()).toEqual(Object.keys(RUNTIME_EXPORTS).sort());
    const script = `
      const names = {};
      for (const entry of ${JSON.stringify(entries)}) names[entry] = Object.keys(await import('${pkg.name}' + entry.slice(1))).sort();
      console.log(JSON.stringify(names));`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, encoding: 'utf8', timeout: 20_000 });
    expect(JSON.parse(output)).toEqual(RUNTIME_EXPORTS);
  });

  it('an app with the tarball installed requires every entry point (CommonJS): the same pinned values, and it decides', () => {
    const entries = Object.keys(pkg.exports).filter((path) => path !== './package.json');
    const script = `
      const names = {};
      for (const entry of ${JSON.stringify(entries)}) names[entry] = Object.keys(require('${pkg.name}' + entry.slice(1))).filter((name) => name !== '__esModule').sort();
      const { createLimiter, memoryStore, InvalidOptionError } = require('tollgate');
      const { RulesHolder, compileRules, parseRules } = require('tollgate/rules');
      const limiter = createLimiter({ store: memoryStore() });
      const policy = { algorithm: 'gcra', limit: 1, window: '1m' };
      Promise.all([limiter.limit('k', policy, { now: 0 }), limiter.limit('k', policy, { now: 0 })]).then(async ([a, b]) => {
        const holder = new RulesHolder(compileRules(parseRules('domain: api\\ndescriptors:\\n  - key: user\\n    rate_limit: { unit: minute, requests_per_unit: 1 }\\n', 'api.yaml')));
        const ruled = createLimiter({ store: memoryStore(), rules: holder });
        const check = await ruled.check({ domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] });
        const refused = await limiter.limit('k', policy, { cost: 0 }).catch((error) => error instanceof InvalidOptionError || error.name);
        console.log(JSON.stringify({ names, answers: [a.allowed, b.allowed, b.retryAfter, check.overallCode], refused: typeof refused, from: require.resolve('tollgate').includes('/package/dist-cjs/') }));
        await limiter.close();
        await ruled.close();
      });`;
    const output = execFileSync(process.execPath, ['--input-type=commonjs', '-e', script], { cwd: app, encoding: 'utf8', timeout: 20_000 });
    const result = JSON.parse(output) as { names: Record<string, string[]>; answers: unknown[]; from: boolean };
    expect(result.names).toEqual(RUNTIME_EXPORTS);
    expect(result.answers).toEqual([true, false, 60_000, 'OK']);
    expect(result.from).toBe(true);
  });

  it('types resolve for both formats: a CommonJS and an ES module file of an app type-check against the tarball', () => {
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'node16', moduleResolution: 'node16', strict: true, noEmit: true, skipLibCheck: true, types: [] }, files: ['app.cts', 'app.mts'] }));
    const body = (load: string) => `${load}
const limiter = createLimiter({ store: memoryStore() });
const pending: Promise<{ allowed: boolean }> = limiter.limit('k', { algorithm: 'gcra', limit: 1, window: '1m' });
const policy: Policy = { algorithm: 'fixed-window', limit: 5, window: '1s' };
export { pending, policy, rateLimit, readRateLimit };
`;
    writeFileSync(join(app, 'app.cts'), body(`import { createLimiter, memoryStore, type Policy } from 'tollgate';\nimport { rateLimit } from 'tollgate/http';\nimport { readRateLimit } from 'tollgate/client';`));
    writeFileSync(join(app, 'app.mts'), body(`import { createLimiter, memoryStore, type Policy } from 'tollgate';\nimport { rateLimit } from 'tollgate/http';\nimport { readRateLimit } from 'tollgate/client';`));
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', app], { cwd: app, encoding: 'utf8', timeout: 120_000 });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  }, 150_000);

  it('tollgate/rules and tollgate share one copy of each class: a RulesHolder from tollgate/rules drives createLimiter', () => {
    const script = `
      import { createLimiter, memoryStore } from 'tollgate';
      import { RulesHolder, compileRules, parseRules } from 'tollgate/rules';
      const yaml = 'domain: api\\ndescriptors:\\n  - key: user\\n    rate_limit: { unit: minute, requests_per_unit: 1 }\\n';
      const holder = new RulesHolder(compileRules(parseRules(yaml, 'api.yaml')));
      const limiter = createLimiter({ store: memoryStore(), rules: holder });
      const request = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u' }] }] };
      const codes = [(await limiter.check(request)).overallCode, (await limiter.check(request)).overallCode];
      console.log(JSON.stringify(codes));
      await limiter.close();`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: app, encoding: 'utf8', timeout: 10_000 });
    expect(JSON.parse(output)).toEqual(['OK', 'OVER_LIMIT']);
  });
});
