/**
 * The client's header reading, style by style, malformed values included (ignored, never thrown);
 * and the same reading of what real servers send: Tollgate's middleware and decision service, and
 * express-rate-limit in each of its draft-6, draft-7 and draft-8 modes.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { afterAll, describe, expect, it } from 'vitest';
import { parseRetryAfter, readRateLimit, type RateLimitInfo } from '../../src/client/index.js';
import { parseMembers } from '../../src/client/structured-field.js';
import { rateLimit } from '../../src/http/index.js';

const NOW = 1_800_000_000_000; // epoch ms, a whole second
const read = (headers: Record<string, string>): RateLimitInfo => readRateLimit(new Headers(headers), NOW);

describe('Retry-After', () => {
  it.each([
    ['120', 120_000],
    ['0', 0],
    [' 7 ', 7_000],
    ['1.5', 1_500],
    [new Date(NOW + 30_000).toUTCString(), 30_000],
    [new Date(NOW - 30_000).toUTCString(), 0], // a date in the past: go now
    ['Fri, 31 Dec 1999 23:59:59 GMT', 0],
  ])('%j → %d ms', (value, ms) => {
    expect(parseRetryAfter(value, NOW)).toBe(ms);
  });

  it.each(['', '-5', 'soon', '1e3', '12abc', 'Fri, 99 Foo 2026 99:99:99 GMT', '99999999999', 'NaN', 'Infinity'])('ignores %j', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeUndefined();
    expect(read({ 'retry-after': value }).retryAfterMs).toBeUndefined();
  });
});

describe('each header style', () => {
  it.each<[string, Record<string, string>, RateLimitInfo]>([
    [
      'X-RateLimit-* with Reset as epoch seconds (Tollgate, GitHub)',
      { 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': '40', 'x-ratelimit-reset': String(NOW / 1000 + 30) },
      { limit: 100, remaining: 40, resetMs: 30_000 },
    ],
    ['X-RateLimit-Reset as delta seconds', { 'x-ratelimit-limit': '10', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '45' }, { limit: 10, remaining: 0, resetMs: 45_000 }],
    ['X-RateLimit-Reset in the past', { 'x-ratelimit-reset': String(NOW / 1000 - 5) }, { resetMs: 0 }],
    [
      'IETF draft 8+ (Tollgate: one policy, with pk)',
      { 'ratelimit-policy': '"default";q=100;w=60;pk=:AAECAwQFBgcICQoL:', ratelimit: '"default";r=50;t=30;pk=:AAECAwQFBgcICQoL:' },
      { limit: 100, windowMs: 60_000, remaining: 50, resetMs: 30_000 },
    ],
    [
      'IETF draft 8+ with spaces (express-rate-limit draft-8)',
      { 'ratelimit-policy': '"100-in-1min"; q=100; w=60; pk=:ZTNiMGM0NDI5OGZj:', ratelimit: '"100-in-1min"; r=99; t=60' },
      { limit: 100, windowMs: 60_000, remaining: 99, resetMs: 60_000 },
    ],
    [
      'IETF, several policies: the one with the fewest remaining binds',
      { 'ratelimit-policy': '"burst";q=10;w=1, "day";q=1000;w=86400', ratelimit: '"burst";r=7;t=1, "day";r=3;t=40000' },
      { limit: 1000, windowMs: 86_400_000, remaining: 3, resetMs: 40_000_000 },
    ],
    ['IETF, equal remaining: the later reset binds', { 'ratelimit-policy': '"a";q=5;w=1, "b";q=9;w=9', ratelimit: '"a";r=0;t=1, "b";r=0;t=9' }, { limit: 9, windowMs: 9_000, remaining: 0, resetMs: 9_000 }],
    ['IETF names as tokens', { 'ratelimit-policy': 'default;q=20;w=10', ratelimit: 'default;r=4;t=2' }, { limit: 20, windowMs: 10_000, remaining: 4, resetMs: 2_000 }],
    ['IETF RateLimit without a policy field', { ratelimit: '"x";r=4;t=2' }, { remaining: 4, resetMs: 2_000 }],
    [
      'draft 7: RateLimit as a dictionary, RateLimit-Policy as a number',
      { 'ratelimit-policy': '100;w=60', ratelimit: 'limit=100, remaining=50, reset=30' },
      { limit: 100, windowMs: 60_000, remaining: 50, resetMs: 30_000 },
    ],
    [
      'draft 6: RateLimit-Limit/Remaining/Reset',
      { 'ratelimit-policy': '100;w=60', 'ratelimit-limit': '100', 'ratelimit-remaining': '50', 'ratelimit-reset': '30' },
      { limit: 100, windowMs: 60_000, remaining: 50, resetMs: 30_000 },
    ],
    ['draft 3: RateLimit-Limit with the window in it', { 'ratelimit-limit': '10, 10;w=1, 50;w=60', 'ratelimit-remaining': '2' }, { limit: 10, remaining: 2 }],
    [
      'IETF wins over X-RateLimit-*, field by field',
      { 'x-ratelimit-limit': '7', 'x-ratelimit-remaining': '6', 'x-ratelimit-reset': '99', ratelimit: '"p";r=1;t=2' },
      { limit: 7, remaining: 1, resetMs: 2_000 },
    ],
  ])('%s', (_style, headers, expected) => {
    expect(read(headers)).toEqual(expected);
  });
});

describe('malformed values are ignored, never thrown', () => {
  const cases: [Record<string, string>, RateLimitInfo][] = [
    [{ 'x-ratelimit-limit': 'abc', 'x-ratelimit-remaining': '-1', 'x-ratelimit-reset': 'soon' }, {}],
    [{ 'x-ratelimit-limit': '1.5', 'x-ratelimit-remaining': '2' }, { remaining: 2 }],
    [{ 'x-ratelimit-limit': '99999999999999999999' }, {}],
    [{ ratelimit: '"a";r=-3;t=2' }, {}],
    [{ ratelimit: '"a";r=abc;t=2, "b";r=5;t=1' }, { remaining: 5, resetMs: 1_000 }],
    [{ ratelimit: '"unterminated;r=1;t=2' }, {}],
    [{ ratelimit: '"a" trailing;r=1' }, {}],
    [{ ratelimit: '"a";r=1;t=2;=3' }, {}],
    [{ ratelimit: ';;;,,,' }, {}],
    [{ ratelimit: 'limit=ten, remaining=5' }, { remaining: 5 }],
    [{ 'ratelimit-policy': '"a";q=0;w=0', ratelimit: '"a";r=0;t=1' }, { limit: 0, remaining: 0, resetMs: 1_000 }],
    [{ 'ratelimit-policy': '"a";q=5;w=-1', ratelimit: '"a";r=1' }, { limit: 5, remaining: 1 }],
    [{ ratelimit: `"a";r=1;t=2${', "b";r=1'.repeat(500)}` }, {}], // over 4 KiB: not read at all
    [{ 'ratelimit-remaining': '5 5', 'ratelimit-reset': '1,2' }, {}],
  ];
  it.each(cases.map(([headers, expected]) => [JSON.stringify(headers).slice(0, 90), headers, expected] as const))('%s', (_name, headers, expected) => {
    expect(read(headers)).toEqual(expected);
  });

  it('reads structured fields with escapes, flags and byte sequences', () => {
    const [member] = parseMembers('"a \\"b\\" \\\\";flag;n=1.5;pk=:AAEC:;t=?1');
    expect(member).toEqual({ key: undefined, value: 'a "b" \\', params: new Map<string, unknown>([['flag', true], ['n', 1.5], ['pk', ':AAEC:'], ['t', true]]) });
    expect(parseMembers('"bad \\x escape";r=1')).toEqual([]);
    expect(parseMembers(null)).toEqual([]);
  });
});

const servers: Server[] = [];
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('what real servers send', () => {
  it("reads Tollgate's middleware in each header style, admitted and throttled", async () => {
    for (const headers of ['legacy', 'ietf', 'both'] as const) {
      // The server's clock stands at NOW (a whole hour): the window cannot roll over mid-test.
      const limiter = rateLimit({ policy: { algorithm: 'fixed-window', limit: 2, window: '1h' }, headers, clock: () => NOW });
      const url = await listen(createServer(async (req, res) => void ((await limiter.handle(req, res)) && res.end('ok'))));
      const infos: RateLimitInfo[] = [];
      for (let i = 0; i < 3; i++) infos.push(read(Object.fromEntries((await fetch(url)).headers)));
      await limiter.close();
      expect(infos.map((info) => [info.limit, info.remaining]), headers).toEqual([[2, 1], [2, 0], [2, 0]]);
      expect(infos[0]!.windowMs, headers).toBe(headers === 'legacy' ? undefined : 3_600_000);
      for (const info of infos) expect(info.resetMs, headers).toBe(3_600_000);
      expect(infos[2]!.retryAfterMs, headers).toBe(3_600_000);
      expect(infos[1]!.retryAfterMs, headers).toBeUndefined();
    }
  });

  it.each(['draft-6', 'draft-7', 'draft-8'] as const)('reads express-rate-limit with standardHeaders: %s', async (draft) => {
    const app = express();
    app.use(expressRateLimit({ windowMs: 60_000, limit: 3, standardHeaders: draft, legacyHeaders: false }));
    app.get('/', (_req, res) => void res.send('ok'));
    const url = await listen(createServer(app));
    const infos: RateLimitInfo[] = [];
    for (let i = 0; i < 4; i++) infos.push(readRateLimit((await fetch(url)).headers, Date.now()));
    expect(infos.map((info) => [info.limit, info.windowMs, info.remaining])).toEqual([
      [3, 60_000, 2],
      [3, 60_000, 1],
      [3, 60_000, 0],
      [3, 60_000, 0],
    ]);
    for (const info of infos) expect(info.resetMs).toBeGreaterThan(0);
    expect(infos[3]!.retryAfterMs).toBeGreaterThan(0);
  });
});
