/**
 * The place cookie's attributes over HTTP and HTTPS, and what a route behind a waiting room answers
 * while the rooms' Redis is down: the service's failure mode (closed: 503 with Retry-After: 1;
 * open: the request goes on).
 */
import { request as httpsRequest } from 'node:https';
import { afterAll, describe, expect, it } from 'vitest';
import { certificateSet } from '../../support/certs.js';
import { send, startTestGateway, startUpstream } from '../../support/gateway.js';
import { startRedis } from '../../support/redis.js';
import { roomConfig, roomRoute, useRoomSecret } from '../../support/waiting-room.js';

const RULES = 'domain: wr\ndescriptors: []\n';
const { certs, ca, server } = certificateSet({ ca: 'waiting-room-ca', server: 'waiting-room-server', client: 'waiting-room-client' });

afterAll(() => certs.close());

/** The Set-Cookie of one GET over HTTPS. */
function httpsCookie(port: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path: '/', ca: ca.certPem, agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.headers['set-cookie'] ?? []));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the place cookie and a store outage', () => {
  it('sets the place cookie HttpOnly, SameSite=Lax, Path=/, with Secure only over HTTPS', async () => {
    useRoomSecret();
    const upstream = await startUpstream();
    const config = roomConfig(upstream.url, roomRoute('/', { room: 'attrs' }));
    const plain = await startTestGateway(config, RULES);
    const tls = await startTestGateway(config, RULES, { flags: { 'tls-cert': server.cert, 'tls-key': server.key } });
    try {
      const [cookie] = (await send(plain.url('/'))).headers['set-cookie'] ?? [];
      expect(cookie).toMatch(/^tollgate_wr_attrs=\d+\.\d+\.w\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=86400; HttpOnly; SameSite=Lax$/);
      const [secure] = await httpsCookie(tls.gateway.port);
      expect(secure).toMatch(/^tollgate_wr_attrs=\d+\.\d+\.w\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=86400; HttpOnly; SameSite=Lax; Secure$/);
    } finally {
      await plain.close();
      await tls.close();
      await upstream.close();
    }
  });

  it('answers the failure mode while Redis is down: closed, 503 with Retry-After: 1; open, the request goes on', { timeout: 30_000 }, async () => {
    useRoomSecret();
    const redis = await startRedis();
    const upstream = await startUpstream();
    const config = roomConfig(upstream.url, roomRoute('/', { room: 'outage' }));
    const closed = await startTestGateway(config, RULES, { flags: { redis: redis.url, 'failure-mode': 'closed' } });
    const open = await startTestGateway(config, RULES, { flags: { redis: redis.url, 'failure-mode': 'open' } });
    try {
      expect((await send(closed.url('/'))).status).toBe(503);
      await redis.stop();
      const refused = await send(closed.url('/'));
      expect([refused.status, refused.headers['retry-after'], refused.headers['cache-control']]).toEqual([503, '1', 'no-store']);
      expect(JSON.parse(refused.body)).toMatchObject({ error: expect.any(String) as unknown });
      expect(refused.headers['set-cookie']).toBeUndefined();
      const passed = await send(open.url('/'));
      expect([passed.status, passed.body]).toEqual([200, 'upstream GET /']);
    } finally {
      await closed.close();
      await open.close();
      await upstream.close();
    }
  });
});
