/**
 * The gateway's listeners close a connection that sends nothing within the headers timeout, as
 * the service's do (test/service/http/connections.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { closedBy, opened } from '../support/sockets.js';

const HEADERS_TIMEOUT_MS = 500;

describe('the gateway closes silent connections on its proxy and admin listeners', () => {
  let gateway: TestGateway;

  beforeAll(async () => {
    const config = 'listen: 0\nupstreams: { app: "http://127.0.0.1:9" }\nroutes:\n  - match: { prefix: / }\n    upstream: app\n';
    gateway = await startTestGateway(config, undefined, { flags: { 'headers-timeout': `${HEADERS_TIMEOUT_MS}ms`, 'keep-alive-timeout': '1200ms' } });
  }, 20_000);
  afterAll(async () => gateway?.close());

  it('closes 20 connections that never send a byte within the headers timeout, without an answer', async () => {
    const started = Date.now();
    const ports = [gateway.gateway.port, gateway.gateway.adminPort];
    const sockets = await Promise.all(Array.from({ length: 20 }, (_, i) => opened(ports[i % 2]!)));
    const closes = await Promise.all(sockets.map((socket) => closedBy(socket, started)));
    for (const { afterMs, received } of closes) {
      expect(afterMs).toBeLessThan(HEADERS_TIMEOUT_MS + 2_500);
      // Closed without an answer: the client sent no request (also when node's own headers check
      // reaches it before the silent-connection timer: test/service/http/client-errors.test.ts).
      expect(received).toBe('');
    }
  }, 15_000);
});
