/**
 * Path confusion through the gateway: with `/admin` limited and a `prefix: /` catch-all, `/./admin`,
 * `/x/../admin`, `/%2e/admin`, `//admin` and `/admin#frag` were matched as written, so the
 * catch-all took them unlimited, and the upstream, which resolves them to `/admin`, served them.
 * The gateway now normalises the path as envoy does (`normalize_path`, `merge_slashes`,
 * `path_with_escaped_slashes_action`), matches and forwards the normalised path, refuses what cannot
 * be normalised (a fragment, bad percent-encoding, NUL) with a 400, offers `case_sensitive: false`
 * per route, and matches a `Host` of any case or with a trailing dot to its route.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClock, send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const RULES = `domain: paths
descriptors:
  - { key: generic_key, value: admin, rate_limit: { unit: minute, requests_per_unit: 0 } }
  - { key: generic_key, value: host, rate_limit: { unit: minute, requests_per_unit: 0 } }
`;

const CONFIG = (upstream: string, settings: string) => `listen: 0
upstreams: { app: "${upstream}" }
domain: paths
${settings}
routes:
  - match: { prefix: /, host: limited.example.com }
    upstream: app
    rate_limits: [{ actions: [{ generic_key: { descriptor_value: host } }] }]
  - match: { prefix: /admin }
    upstream: app
    rate_limits: [{ actions: [{ generic_key: { descriptor_value: admin } }] }]
  - match: { prefix: /private, case_sensitive: false }
    upstream: app
    rate_limits: [{ actions: [{ generic_key: { descriptor_value: admin } }] }]
  - match: { prefix: / }
    upstream: app
`;

/** Spellings of `/admin` an upstream resolves to `/admin` (node, nginx, most frameworks). */
const ADMIN_SPELLINGS = ['/./admin', '/x/../admin', '/%2e/admin', '/%2E%2e/admin', '//admin', '/%61dmin', '/public/..\\admin', '/admin/.'];

const clock = new TestClock();
let upstream: Upstream;
let defaults: TestGateway;
let raw: TestGateway;
let rejecting: TestGateway;
let unescaping: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  [defaults, raw, rejecting, unescaping] = await Promise.all([
    startTestGateway(CONFIG(upstream.url, ''), RULES, { clock }),
    startTestGateway(CONFIG(upstream.url, 'normalize_path: false\nmerge_slashes: false\npath_with_escaped_slashes_action: keep_unchanged'), RULES, { clock }),
    // envoy's enum spelling is taken as well.
    startTestGateway(CONFIG(upstream.url, 'path_with_escaped_slashes_action: REJECT_REQUEST'), RULES, { clock }),
    startTestGateway(CONFIG(upstream.url, 'path_with_escaped_slashes_action: unescape_and_forward'), RULES, { clock }),
  ]);
});
afterAll(async () => {
  await Promise.all([defaults?.close(), raw?.close(), rejecting?.close(), unescaping?.close()]);
  await upstream?.close();
});

/** What the upstream received for one request, or undefined when it received nothing. */
async function through(gateway: TestGateway, path: string, headers: Record<string, string> = {}): Promise<{ status: number; location: string | undefined; upstreamPath: string | undefined; body: string }> {
  const before = upstream.requests.length;
  const answer = await send(gateway.url('/'), { headers, path });
  const reached = upstream.requests.slice(before);
  return { status: answer.status, body: answer.body, location: answer.headers.location, upstreamPath: reached[0]?.url };
}

describe('path confusion: other spellings of a limited path', () => {
  it('every spelling of /admin is limited as /admin, and none reaches the upstream', async () => {
    for (const path of ['/admin', ...ADMIN_SPELLINGS]) {
      const answer = await through(defaults, path);
      // Before: 200 from the catch-all for every spelling but /admin, and the upstream saw the raw path.
      expect({ path, status: answer.status, upstreamPath: answer.upstreamPath }).toEqual({ path, status: 429, upstreamPath: undefined });
    }
  });

  it('an escaped slash is unescaped and redirected (307 to the normalised path), so it comes back as /admin and is limited', async () => {
    expect(await through(defaults, '/%2Fadmin?x=1')).toMatchObject({ status: 307, location: '/admin?x=1', upstreamPath: undefined });
    expect(await through(defaults, '/x/..%2fadmin')).toMatchObject({ status: 307, location: '/admin', upstreamPath: undefined });
    expect(await through(defaults, '/a%5cb')).toMatchObject({ status: 307, location: '/a/b', upstreamPath: undefined });
  });

  it('reject_request refuses an escaped slash; unescape_and_forward forwards the unescaped, normalised path', async () => {
    expect(await through(rejecting, '/%2fadmin')).toMatchObject({ status: 400, upstreamPath: undefined });
    expect(await through(rejecting, '/a%5Cb')).toMatchObject({ status: 400, upstreamPath: undefined });
    expect(await through(unescaping, '/%2Fadmin')).toMatchObject({ status: 429, upstreamPath: undefined });
    expect(await through(unescaping, '/a%2fb%5cc')).toMatchObject({ status: 200, upstreamPath: '/a/b/c' });
  });

  it('a fragment, bad percent-encoding and NUL are refused with a 400 that says why', async () => {
    for (const path of ['/admin#frag', '/%zzadmin', '/admin%', '/ad%0min', '/%00admin', '/.%00./admin']) {
      const answer = await through(defaults, path);
      expect({ path, status: answer.status, upstreamPath: answer.upstreamPath }).toEqual({ path, status: 400, upstreamPath: undefined });
      expect(JSON.parse(answer.body)).toMatchObject({ error: 'bad_request', message: expect.stringMatching(/path/) });
    }
  });

  it('the upstream receives the normalised path, the query string untouched', async () => {
    expect(await through(defaults, '/x/./y/../public//page?q=../a//b&r=%2e')).toMatchObject({ status: 200, upstreamPath: '/x/public/page?q=../a//b&r=%2e' });
    // Percent-encoded unreserved characters are decoded; reserved ones stay encoded, their case kept.
    expect(await through(defaults, '/%7Euser/%41%2d%5F/a%3Fb%2a')).toMatchObject({ status: 200, upstreamPath: '/~user/A-_/a%3Fb%2a' });
    expect(await through(defaults, '/../..')).toMatchObject({ status: 200, upstreamPath: '/' });
    // Dot segments go before slashes are merged (envoy's order): whatever the result, it is the path the upstream gets.
    expect(await through(defaults, '/x//../admin')).toMatchObject({ status: 200, upstreamPath: '/x/admin' });
  });

  it('case_sensitive: false takes every case of its prefix; the default (true) takes its case only', async () => {
    for (const path of ['/private', '/PRIVATE/x', '/Private', '/x/../PrIvAtE']) expect({ path, ...(await through(defaults, path)) }).toMatchObject({ path, status: 429 });
    // The default is envoy's: /ADMIN is not /admin, and goes to the catch-all.
    expect(await through(defaults, '/ADMIN')).toMatchObject({ status: 200, upstreamPath: '/ADMIN' });
  });

  it('a Host of any case, with a trailing dot or a port, matches its route', async () => {
    for (const host of ['limited.example.com', 'LIMITED.Example.COM', 'limited.example.com.', 'Limited.Example.Com.:8080']) {
      expect({ host, ...(await through(defaults, '/anything', { host })) }).toMatchObject({ host, status: 429 });
    }
    expect(await through(defaults, '/anything', { host: 'other.example.com.' })).toMatchObject({ status: 200 });
  });

  it('with normalisation turned off, paths are matched and forwarded as sent (envoy with its defaults)', async () => {
    expect(await through(raw, '/./admin')).toMatchObject({ status: 200, upstreamPath: '/./admin' });
    expect(await through(raw, '//admin')).toMatchObject({ status: 200, upstreamPath: '//admin' });
    expect(await through(raw, '/a%2Fb')).toMatchObject({ status: 200, upstreamPath: '/a%2Fb' });
    // A fragment is still refused: no RFC lets a client send one.
    expect(await through(raw, '/admin#frag')).toMatchObject({ status: 400 });
  });
});
