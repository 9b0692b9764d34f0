/**
 * A JWT over the length cap, silently anonymous: a token longer than 8 KiB (many claims, a big
 * `groups` list) was never verified and the request had no identity, with nothing to say so. The
 * cap is now an option (`maxLength`, default 8,192 characters) and every token refused for it is
 * reported to `onTooLong`, for the application to count in a metric. Through the public
 * `jwtIdentity` and `byJwt` over a real node:http server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { byJwt, rateLimit } from '../../src/http/index.js';
import { MAX_JWT_LENGTH, jwtIdentity } from '../../src/http/identity/index.js';

const SECRET = new TextEncoder().encode('oversized-jwt-test-secret-0123456789abcdef');
const NOW_S = 1_800_000_000;
const now = () => NOW_S * 1_000;

/** An HS256 token for `sub`, padded with a `groups` claim to about `length` characters. */
async function tokenOf(sub: string, length: number): Promise<string> {
  const groups = 'g'.repeat(Math.max(0, Math.floor(((length - 120) * 3) / 4)));
  return new SignJWT({ sub, groups }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt(NOW_S).sign(SECRET);
}

describe('a JWT over the length cap', () => {
  it('is refused by default and reported to onTooLong; a raised maxLength verifies it', async () => {
    const token = await tokenOf('alice', 9_000);
    expect(token.length).toBeGreaterThan(MAX_JWT_LENGTH);
    const header = (name: string) => (name === 'authorization' ? `Bearer ${token}` : undefined);
    const tooLong: number[] = [];
    expect(await jwtIdentity({ secret: SECRET, now, onTooLong: (length) => tooLong.push(length) })(header)).toBeUndefined();
    expect(tooLong).toEqual([token.length]);
    expect(await jwtIdentity({ secret: SECRET, now, maxLength: 16_384, onTooLong: (length) => tooLong.push(length) })(header)).toBe('user:alice');
    expect(tooLong).toHaveLength(1);
    expect(() => jwtIdentity({ secret: SECRET, maxLength: 10 })).toThrow('jwtIdentity: maxLength must be a whole number of characters from 64 to 1048576, got 10');
    expect(() => jwtIdentity({ secret: SECRET, onTooLong: 5 as never })).toThrow('jwtIdentity: onTooLong must be a function, got 5');
  });

  describe('through the middleware', () => {
    let server: Server;
    let url: string;
    const counted: number[] = [];

    beforeAll(async () => {
      // Requests without an identity are not limited by this key; with one, 1 per minute.
      const limiter = rateLimit({ policy: { algorithm: 'fixed-window', limit: 1, window: '1m' }, key: byJwt({ secret: SECRET, now, onTooLong: (length) => counted.push(length) }) });
      server = createServer((req, res) => limiter(req, res, () => res.end('ok')));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('counts each oversized token a request carries, where it used to vanish', async () => {
      const token = await tokenOf('bob', 9_000);
      for (let i = 0; i < 3; i++) await (await fetch(url, { headers: { authorization: `Bearer ${token}` } })).text();
      expect(counted).toEqual([token.length, token.length, token.length]);
    });
  });
});
