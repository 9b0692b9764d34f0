/**
 * The behaviour suite every adapter must pass: node:http, Express, Fastify and Hono, real HTTP over
 * loopback, the memory store (Redis runs in middleware-redis.test.ts).
 */
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import { compileRules, parseRules } from '../../src/rules/index.js';
import { byApiKey, byHeader, byJwt, rateLimit } from '../../src/http/index.js';
import { memoryStore } from '../../src/index.js';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimiter } from '../../src/http/hono.js';
import { FRAMEWORKS, startApp, type RunningApp, type SharedOptions } from '../support/http-apps.js';

const hourly = (limit: number) => ({ algorithm: 'fixed-window' as const, limit, window: '1h' });

describe.each(FRAMEWORKS)('%s middleware', (framework) => {
  let app: RunningApp | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  const start = async (limiters: SharedOptions[], perRoute?: SharedOptions) => {
    app = await startApp(framework, limiters, perRoute);
    return app.url;
  };

  it('2 per second: 200, 200, then 429 with the headers and the JSON body', async () => {
    const url = await start([{ policy: { algorithm: 'sliding-log', limit: 2, window: '1s' } }]);
    const before = Date.now();
    const responses = [await fetch(`${url}/hello`), await fetch(`${url}/hello`), await fetch(`${url}/hello`)];
    expect(responses.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(responses.map((r) => r.headers.get('x-ratelimit-limit'))).toEqual(['2', '2', '2']);
    expect(responses.map((r) => r.headers.get('x-ratelimit-remaining'))).toEqual(['1', '0', '0']);
    for (const response of responses) {
      const reset = Number(response.headers.get('x-ratelimit-reset'));
      expect(reset * 1000).toBeGreaterThanOrEqual(before);
      expect(reset * 1000).toBeLessThanOrEqual(Date.now() + 2000);
    }
    expect(await responses[0]!.text()).toBe('ok');
    expect(responses[0]!.headers.get('retry-after')).toBeNull();
    const limited = responses[2]!;
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.headers.get('x-ratelimit-retry-after')).toBe('1');
    expect(limited.headers.get('content-type')).toMatch(/^application\/json/);
    const body = await limited.json();
    expect(body).toEqual({ error: 'rate_limited', message: expect.stringContaining('2 per second'), limit: 2, remaining: 0, retryAfter: 1, 'violated-policies': ['2-per-1s'] });
  });

  it('says the rate and the burst apart when they differ: 2 per second, in bursts of up to 3', async () => {
    const url = await start([{ policy: { algorithm: 'token-bucket', limit: 2, burst: 3, window: '1s' } }]);
    const responses = [];
    for (let i = 0; i < 4; i++) responses.push(await fetch(`${url}/hello`));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    const { message } = (await responses[3]!.json()) as { message: string };
    expect(message).toMatch(/^Too many requests: the limit is 2 per second, in bursts of up to 3\. Retry in 1 s\.$/);
  });

  it('answers application/problem+json with the quota-exceeded problem type when asked', async () => {
    const url = await start([{ name: 'burst', policy: hourly(1) }]);
    await fetch(`${url}/hello`);
    const response = await fetch(`${url}/hello`, { headers: { accept: 'application/problem+json, application/json;q=0.5' } });
    expect(response.status).toBe(429);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await response.json()) as Record<string, number>;
    expect(problem).toMatchObject({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      status: 429,
      'violated-policies': ['burst'],
      limit: 1,
      remaining: 0,
    });
    expect(problem.retryAfter).toBeGreaterThanOrEqual(1);
  });

  it('sends the IETF RateLimit-Policy and RateLimit fields, one named item per policy, pk hashed', async () => {
    const url = await start([{ name: 'hourly', policy: hourly(5), headers: 'both' }]);
    const response = await fetch(`${url}/hello`);
    const policy = response.headers.get('ratelimit-policy')!;
    const current = response.headers.get('ratelimit')!;
    expect(policy).toMatch(/^"hourly";q=5;w=3600;pk=:[A-Za-z0-9+/]{16}:$/);
    expect(current).toMatch(/^"hourly";r=4;t=\d+;pk=:[A-Za-z0-9+/]{16}:$/);
    expect(Number(/t=(\d+)/.exec(current)![1])).toBeLessThanOrEqual(3600);
    expect(policy).not.toContain('127.0.0.1');
    expect(response.headers.get('x-ratelimit-limit')).toBe('5');
  });

  it('ignores X-Forwarded-For from an untrusted peer', async () => {
    const url = await start([{ policy: hourly(2) }]);
    const statuses = [];
    for (const spoof of ['1.1.1.1', '2.2.2.2', '3.3.3.3']) {
      statuses.push((await fetch(`${url}/hello`, { headers: { 'x-forwarded-for': spoof, 'x-real-ip': spoof, forwarded: `for=${spoof}` } })).status);
    }
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('uses the right-most untrusted hop behind a trusted proxy', async () => {
    const url = await start([{ policy: hourly(1), trustProxy: ['loopback', '10.0.0.0/8'] }]);
    // The client forged "6.6.6.6"; our proxies 10.0.0.1 and the loopback peer appended what they saw.
    const via = (chain: string) => fetch(`${url}/hello`, { headers: { 'x-forwarded-for': chain } }).then((r) => r.status);
    expect(await via('6.6.6.6, 203.0.113.7, 10.0.0.1')).toBe(200);
    expect(await via('7.7.7.7, 203.0.113.7, 10.0.0.1')).toBe(429); // same client, other forgery
    expect(await via('203.0.113.8, 10.0.0.1')).toBe(200); // another client
    expect(await via('::ffff:203.0.113.8')).toBe(429); // the same client, IPv4-mapped
  });

  it('keys IPv6 clients by /56 and folds IPv4-mapped addresses, through a trusted proxy', async () => {
    const url = await start([{ policy: hourly(5), trustProxy: 'loopback' }]);
    const from = (address: string) => fetch(`${url}/hello`, { headers: { 'x-forwarded-for': address } }).then(async (r) => (await r.arrayBuffer(), r.status));
    const count = framework === 'node' ? 10_000 : 1000;
    const random16 = () => Math.floor(Math.random() * 0x10000).toString(16);
    // Addresses inside 2001:db8:aa:bb00::/56: the last byte of the 4th group and the 64-bit tail vary.
    const addresses = Array.from({ length: count }, () => `2001:db8:aa:bb${Math.floor(Math.random() * 256).toString(16).padStart(2, '0')}:${random16()}:${random16()}:${random16()}:${random16()}`);
    const statuses: number[] = [];
    for (let i = 0; i < addresses.length; i += 50) statuses.push(...(await Promise.all(addresses.slice(i, i + 50).map(from))));
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(await from('2001:db8:aa:bc00::1')).toBe(200); // the neighbouring /56
    // Three spellings of one IPv4 client share a key; an IPv6 address embedding the same bits does not.
    expect([await from('::ffff:1.2.3.4'), await from('::ffff:102:304'), await from('1.2.3.4')]).toEqual([200, 200, 200]);
    expect([await from('1.2.3.4'), await from('1.2.3.4'), await from('::ffff:102:304')]).toEqual([200, 200, 429]);
    expect(await from('2001:db8::1.2.3.4')).toBe(200);
  }, 60_000);

  it('limits every route that reaches a handler: nested routers, prefixes, 404s, HEAD, OPTIONS, encoded paths', async () => {
    const url = await start([{ policy: hourly(7) }]);
    const attempts: Array<[string, string]> = [
      ['GET', '/hello'],
      ['GET', '/api/v1/items/42'],
      ['GET', '/admin/stats'],
      ['GET', '/no/such/route'],
      ['HEAD', '/hello'],
      ['OPTIONS', '/hello'],
      ['GET', '/%68ello?x=%20'],
    ];
    const seen: Array<[string, string | null]> = [];
    for (const [method, path] of attempts) {
      const response = await fetch(`${url}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBeLessThan(500);
      seen.push([`${method} ${path}`, response.headers.get('x-ratelimit-remaining')]);
      await response.arrayBuffer();
    }
    expect(seen.map(([, remaining]) => remaining)).toEqual(['6', '5', '4', '3', '2', '1', '0']);
    for (const [method, path] of attempts) {
      const response = await fetch(`${url}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBe(429);
      if (method === 'HEAD') expect(await response.text()).toBe('');
    }
  });

  it('reports every policy when several limiters run on one route, never negative, never a past reset', async () => {
    const url = await start([
      { name: 'wide', policy: hourly(5), headers: 'both' },
      { name: 'narrow', policy: { algorithm: 'token-bucket', limit: 2, window: '1m' }, headers: 'both' },
    ]);
    const first = await fetch(`${url}/hello`);
    expect(first.headers.get('ratelimit-policy')).toMatch(/^"wide";q=5;w=3600;pk=:[^:]+:, "narrow";q=2;w=60;pk=:[^:]+:$/);
    expect(first.headers.get('ratelimit')).toMatch(/^"wide";r=4;t=\d+;pk=:[^:]+:, "narrow";r=1;t=\d+;pk=:[^:]+:$/);
    // X-RateLimit-* describe the tighter of the two, not whichever ran last.
    expect(first.headers.get('x-ratelimit-limit')).toBe('2');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('1');
    await fetch(`${url}/hello`);
    const third = await fetch(`${url}/hello`, { headers: { accept: 'application/problem+json' } });
    expect(third.status).toBe(429);
    expect(((await third.json()) as Record<string, unknown>)['violated-policies']).toEqual(['narrow']);
    expect(third.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(third.headers.get('x-ratelimit-reset')) * 1000).toBeGreaterThanOrEqual(Date.now() - 1000);
    for (const match of third.headers.get('ratelimit')!.matchAll(/r=(-?\d+);t=(-?\d+)/g)) {
      expect(Number(match[1])).toBeGreaterThanOrEqual(0);
      expect(Number(match[2])).toBeGreaterThanOrEqual(0);
    }
  });

  it('decides several limits of one middleware together: a refused request spends none of them', async () => {
    const url = await start([
      {
        limits: [
          { name: 'per-ip', policy: hourly(3) },
          { name: 'per-key', policy: hourly(1), key: byApiKey() },
        ],
      },
    ]);
    const call = (apiKey?: string) => fetch(`${url}/hello`, { headers: apiKey === undefined ? {} : { 'x-api-key': apiKey } });
    expect((await call('k1')).status).toBe(200);
    const refused = await call('k1');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('x-ratelimit-limit')).toBe('1');
    // The refused request did not spend the per-IP quota: 2 left for requests without a key.
    const anonymous = await call();
    expect(anonymous.status).toBe(200);
    expect(anonymous.headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await call('k2')).status).toBe(200);
    expect((await call()).status).toBe(429);
  });

  it('builds each limit its own key for one client: a limit named b counts under b| even right after a limit named a built its key', async () => {
    // Two middlewares on one store: the first decides limits a and b together for the client's IP,
    // the second limit b alone. Both write b|ip:…, so the second sees the first's request too.
    const store = memoryStore({ sweepIntervalMs: 0 });
    const url = await start([{ store, limits: [{ name: 'a', policy: hourly(10) }, { name: 'b', policy: hourly(10) }] }, { store, name: 'b', policy: hourly(3) }]);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await fetch(`${url}/hello`)).status);
    // Request 1: b counts 1 then 2; request 2: 3, then the second middleware refuses (3 of 3 used).
    expect(statuses).toEqual([200, 429, 429]);
    await store.close();
  });

  it('applies a limiter to one route only', async () => {
    const url = await start([], { policy: hourly(1) });
    expect((await fetch(`${url}/limited-route`)).status).toBe(200);
    expect((await fetch(`${url}/limited-route`)).status).toBe(429);
    const other = await fetch(`${url}/hello`);
    expect(other.status).toBe(200);
    expect(other.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it('honours skip and cost, and a cost of 0 only reports', async () => {
    const url = await start([
      {
        policy: hourly(10),
        key: byHeader('x-tenant'),
        skip: (_req, view) => view.path === '/admin/stats',
        cost: (_req, view) => (view.method === 'HEAD' ? 0 : view.path.startsWith('/api') ? 4 : 1),
      },
    ]);
    const call = (path: string, method = 'GET') => fetch(`${url}${path}`, { method, headers: { 'x-tenant': 'acme' } });
    expect((await call('/api/v1/items/42')).headers.get('x-ratelimit-remaining')).toBe('6');
    expect((await call('/hello', 'HEAD')).headers.get('x-ratelimit-remaining')).toBe('6');
    const skipped = await call('/admin/stats');
    expect(skipped.status).toBe(200);
    expect(skipped.headers.get('x-ratelimit-remaining')).toBeNull();
    expect((await call('/api/v1/items/42')).headers.get('x-ratelimit-remaining')).toBe('2');
    const tooDear = await call('/api/v1/items/42');
    expect(tooDear.status).toBe(429);
    expect((await call('/hello')).headers.get('x-ratelimit-remaining')).toBe('1');
    // No tenant header: this limit does not apply.
    const anonymous = await fetch(`${url}/hello`);
    expect(anonymous.status).toBe(200);
    expect(anonymous.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it('uses the custom message and the none header style', async () => {
    const url = await start([{ policy: hourly(1), headers: 'none', message: 'Slow down, please.' }]);
    const ok = await fetch(`${url}/hello`);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-ratelimit-limit')).toBeNull();
    const limited = await fetch(`${url}/hello`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).not.toBeNull();
    expect(limited.headers.get('x-ratelimit-retry-after')).toBeNull();
    expect(((await limited.json()) as { message: string }).message).toBe('Slow down, please.');
  });

  it('follows a controlled clock: admitted again once the window has passed', async () => {
    let now = Date.UTC(2030, 0, 1, 12, 0, 0);
    const url = await start([{ policy: { algorithm: 'fixed-window', limit: 1, window: '1m' }, clock: () => now }]);
    expect((await fetch(`${url}/hello`)).status).toBe(200);
    const limited = await fetch(`${url}/hello`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('60');
    expect(limited.headers.get('x-ratelimit-reset')).toBe(String((now + 60_000) / 1000));
    now += 59_999;
    expect((await fetch(`${url}/hello`)).headers.get('retry-after')).toBe('1');
    now += 1;
    expect((await fetch(`${url}/hello`)).status).toBe(200);
  });

  it('shapes traffic with a leaky bucket: over the rate but within the queue waits its turn', async () => {
    // 20 per second: one every 50 ms. A queue of up to 150 ms: 4 requests pass (0, 50, 100, 150 ms), the rest are refused.
    // On a clock that stands still: the six are decided at one instant however late a busy machine
    // delivers them (in real time the bucket drains between late arrivals and lets a fifth through).
    const now = Date.now();
    const url = await start([{ policy: { algorithm: 'leaky-bucket', limit: 20, window: '1s', burst: 10 }, shaping: { maxDelay: '150ms' }, clock: () => now }]);
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const response = await fetch(`${url}/hello`);
        await response.arrayBuffer();
        return { status: response.status, at: performance.now() - started };
      }),
    );
    const passed = results.filter((r) => r.status === 200).map((r) => r.at).sort((a, b) => a - b);
    expect(passed).toHaveLength(4);
    expect(results.filter((r) => r.status === 429)).toHaveLength(2);
    // Each waited its turn: the last one was held its 150 ms (counted from before the first was
    // sent, a bound a busy machine can only make later; the timer may fire a millisecond early).
    expect(passed[3]!).toBeGreaterThanOrEqual(148);
    expect(passed[3]!).toBeLessThan(10_000);
  });

  it('checks envoy-style rules with descriptors from the request', async () => {
    const rules = compileRules(
      parseRules(
        [
          'domain: web',
          'descriptors:',
          '  - key: remote_address',
          '    rate_limit: { unit: hour, requests_per_unit: 3, name: per-ip }',
          '  - key: path',
          '    value: /admin/stats',
          '    rate_limit: { unit: hour, requests_per_unit: 1, name: admin }',
        ].join('\n'),
        'web.yaml',
      ),
    );
    const url = await start([
      {
        rules,
        domain: 'web',
        headers: 'both',
        descriptors: (_req, view) => [{ entries: [{ key: 'remote_address', value: view.ip }] }, { entries: [{ key: 'path', value: view.path }] }],
      },
    ]);
    const first = await fetch(`${url}/admin/stats`);
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-policy')).toMatch(/^"per-ip";q=3;w=3600;pk=:[^:]+:, "admin";q=1;w=3600;pk=:[^:]+:$/);
    expect(first.headers.get('x-ratelimit-limit')).toBe('1');
    const second = await fetch(`${url}/admin/stats`, { headers: { accept: 'application/problem+json' } });
    expect(second.status).toBe(429);
    expect(((await second.json()) as Record<string, unknown>)['violated-policies']).toEqual(['admin']);
    // The refused request spent nothing: 2 of the 3 per-IP requests are left, then the third is refused.
    const hello = await fetch(`${url}/hello`);
    expect(hello.headers.get('x-ratelimit-remaining')).toBe('1');
    expect((await fetch(`${url}/hello`)).status).toBe(200);
    expect((await fetch(`${url}/hello`)).status).toBe(429);
  });

  it('an org > team > user hierarchy: the 429 names the level that fired (the team), and no level spends', async () => {
    // examples/rules/hierarchy.yaml with smaller budgets.
    const yaml = readFileSync('examples/rules/hierarchy.yaml', 'utf8').replace('1000', '10').replace('requests_per_unit: 100 ', 'requests_per_unit: 3 ').replace('30', '2');
    const rules = compileRules(parseRules(yaml, 'hierarchy.yaml'));
    const url = await start([
      {
        rules,
        domain: 'hierarchy',
        descriptors: (_req, view) => {
          const [org, team, user] = (['org', 'team', 'user'] as const).map((key) => ({ key, value: view.header(`x-${key}`) ?? '' }));
          return [{ entries: [org!] }, { entries: [org!, team!] }, { entries: [org!, team!, user!] }];
        },
      },
    ]);
    const as = (user: string) => fetch(`${url}/hello`, { headers: { 'x-org': 'acme', 'x-team': 'search', 'x-user': user } });
    expect([(await as('1')).status, (await as('1')).status, (await as('2')).status]).toEqual([200, 200, 200]);
    const refused = await as('3'); // user 3 and the org have room; the team's 3 are spent
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: 'rate_limited', 'violated-policies': ['team_budget'] });
    const problem = await fetch(`${url}/hello`, { headers: { 'x-org': 'acme', 'x-team': 'search', 'x-user': '4', accept: 'application/problem+json' } });
    expect(((await problem.json()) as Record<string, unknown>)['violated-policies']).toEqual(['team_budget']);
    // The user's own budget fires by its name; the refusals took nothing from the org (3 of 10 spent).
    const other = (user: string) => fetch(`${url}/hello`, { headers: { 'x-org': 'acme', 'x-team': 'ads', 'x-user': user } });
    expect([(await other('1')).status, (await other('1')).status]).toEqual([200, 200]);
    expect(await (await other('1')).json()).toMatchObject({ 'violated-policies': ['user_budget'] });
  });

  it('with rules, a cost of 0 reports the quota without spending it', async () => {
    const rules = compileRules(parseRules('domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n', 'web.yaml'));
    const url = await start([{ rules, domain: 'web', cost: (_req, view) => (view.method === 'HEAD' ? 0 : 1) }]);
    const head = () => fetch(`${url}/hello`, { method: 'HEAD' });
    expect((await head()).headers.get('x-ratelimit-remaining')).toBe('2');
    expect((await head()).headers.get('x-ratelimit-remaining')).toBe('2');
    expect((await fetch(`${url}/hello`)).headers.get('x-ratelimit-remaining')).toBe('1');
    await fetch(`${url}/hello`);
    const spent = await head();
    expect(spent.status).toBe(200);
    expect(spent.headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await fetch(`${url}/hello`)).status).toBe(429);
  });

  it('limits per IP and per verified user on the same request (hybrid identity)', async () => {
    const secret = new TextEncoder().encode('a-test-secret-of-at-least-32-bytes!!');
    const token = (sub: string) => new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(sub).setExpirationTime('1h').sign(secret);
    const url = await start([
      {
        limits: [
          { name: 'ip', policy: hourly(4) },
          { name: 'user', policy: hourly(2), key: byJwt({ secret }) },
        ],
      },
    ]);
    const [alice, bob] = await Promise.all([token('alice'), token('bob')]);
    const call = (jwt?: string) => fetch(`${url}/hello`, { headers: jwt === undefined ? {} : { authorization: `Bearer ${jwt}` } }).then((r) => r.status);
    expect([await call(alice), await call(alice), await call(alice)]).toEqual([200, 200, 429]);
    // A forged token is no user: only the IP limit applies.
    expect(await call(`${alice.slice(0, -4)}AAAA`)).toBe(200);
    expect(await call(bob)).toBe(200);
    expect(await call(bob)).toBe(429); // the IP limit (4) is spent
  });

  it('passes an error thrown by a key function to the framework (500), and keeps serving', async () => {
    const url = await start([
      {
        policy: hourly(100),
        key: (_req, view) => {
          if (view.path === '/admin/stats') throw new Error('key function bug');
          return 'k';
        },
      },
    ]);
    const broken = await fetch(`${url}/admin/stats`);
    expect(broken.status).toBe(500);
    await broken.arrayBuffer();
    expect((await fetch(`${url}/hello`)).status).toBe(200);
  });
});

describe('bad middleware options are refused when the middleware is created', () => {
  const makers: Array<[string, (options: unknown) => unknown]> = [
    ['rateLimit', (options) => rateLimit(options as never)],
    ['rateLimitHook', (options) => rateLimitHook(options as never)],
    ['rateLimiter', (options) => rateLimiter(options as never)],
  ];
  const cases: Array<[string, unknown, RegExp]> = [
    ['not an object', 'fast', /options must be an object/],
    ['no policy', {}, /give exactly one of policy/],
    ['policy and rules', { policy: hourly(1), limits: [{ policy: hourly(1) }] }, /give exactly one of policy/],
    ['bad policy', { policy: { algorithm: 'fixed-window', limit: -1, window: '1m' } }, /limit/],
    ['unknown option', { policy: hourly(1), windowSize: 1000 }, /unknown rate limit option "windowSize"; the rate limit options are store, policy/],
    ['bad headers style', { policy: hourly(1), headers: 'draft-7' }, /headers must be one of/],
    ['bad cost', { policy: hourly(1), cost: 1.5 }, /cost must be a whole number/],
    ['key not a function', { policy: hourly(1), key: 'ip' }, /key must be a function/],
    ['rules not a rule set', { rules: { current: () => undefined }, domain: 'api' }, /rules must be a RulesHolder or RuleSet/],
    ['duplicate limit names', { limits: [{ name: 'a', policy: hourly(1) }, { name: 'a', policy: hourly(2) }] }, /two limits are named "a"/],
    ['shaping without leaky bucket', { policy: hourly(1), shaping: { maxDelay: '1s' } }, /shaping needs one policy with algorithm 'leaky-bucket'/],
    ['bad maxDelay', { policy: { algorithm: 'leaky-bucket', limit: 1, window: '1s' }, shaping: { maxDelay: 'soon' } }, /shaping.maxDelay/],
    ['trustProxy true', { policy: hourly(1), trustProxy: true }, /trustProxy/],
    ['bad ipv6Subnet', { policy: hourly(1), ipv6Subnet: 128 }, /ipv6Subnet/],
    ['bad failureMode', { policy: hourly(1), failureMode: 'sometimes' }, /failureMode must be 'open'/],
    ['65 limits', { limits: Array.from({ length: 65 }, (_, i) => ({ name: `l${i}`, policy: hourly(1) })) }, /^limits has 65 entries; at most 64 limits are decided together/],
    ['no limits', { limits: [] }, /^limits must be a non-empty array .*, got an empty array$/],
    ['a limit name of 129 characters', { limits: [{ name: 'n'.repeat(129), policy: hourly(1) }] }, /^limits\[0\]: name must be a non-empty string of at most 128 characters, got 129 characters$/],
  ];
  for (const [maker, make] of makers) {
    it.each(cases)(`${maker}: %s`, (_name, options, message) => {
      expect(() => make(options)).toThrow(message);
    });
  }
});

describe('hono specifics', () => {
  it('adds the headers to a Response a handler built itself', async () => {
    const app = await startApp('hono', [{ policy: hourly(3), headers: 'both' }]);
    try {
      const response = await fetch(`${app.url}/raw-response`);
      expect(await response.text()).toBe('raw');
      expect(response.headers.get('x-ratelimit-remaining')).toBe('2');
      expect(response.headers.get('ratelimit')).toMatch(/^"3-per-1h";r=2;/);
    } finally {
      await app.close();
    }
  });

  it('works without node-server too (headers through c.header, e.g. app.request or another runtime)', async () => {
    const { Hono } = await import('hono');
    const app = new Hono();
    app.use('*', rateLimiter({ policy: hourly(2), remoteAddress: () => '192.0.2.1' }));
    app.get('/hello', (c) => c.text('ok'));
    app.get('/raw', () => new Response('raw'));
    const first = await app.request('/hello');
    expect([first.status, first.headers.get('x-ratelimit-remaining')]).toEqual([200, '1']);
    const raw = await app.request('/raw');
    expect([raw.status, raw.headers.get('x-ratelimit-remaining'), await raw.text()]).toEqual([200, '0', 'raw']);
    const limited = await app.request('/hello');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).not.toBeNull();
  });
});


describe('express specifics', () => {
  it('combines the reports of a limiter in front of an Express app (node prototype) and one inside it (Express prototype)', async () => {
    const { createServer } = await import('node:http');
    const { default: express } = await import('express');
    const outer = rateLimit({ name: 'outer', policy: hourly(5), headers: 'both' });
    const inner = rateLimit({ name: 'inner', policy: hourly(2), headers: 'both' });
    const app = express();
    app.use(inner);
    app.get('/hello', (_req, res) => {
      res.send('ok');
    });
    const server = createServer((req, res) => outer(req, res, () => app(req, res)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as { port: number };
      const response = await fetch(`http://127.0.0.1:${port}/hello`);
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toMatch(/^"outer";q=5;w=3600;pk=:[^:]+:, "inner";q=2;w=3600;pk=:[^:]+:$/);
      expect(response.headers.get('x-ratelimit-limit')).toBe('2');
      expect(response.headers.get('x-ratelimit-remaining')).toBe('1');
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await Promise.all([outer.close(), inner.close()]);
    }
  });
});
