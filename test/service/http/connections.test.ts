/**
 * Connection hygiene over real TCP: a connection that sends nothing is closed within the headers
 * timeout, an idle keep-alive connection lives until the keep-alive timeout (not the shorter
 * headers timeout), a slow but progressing upload is not cut, and the per-connection request cap
 * ends a connection with `Connection: close`.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService } from '../../../src/service/server.js';
import { closedBy, opened } from '../../support/sockets.js';

const HEADERS_TIMEOUT_MS = 500;
const KEEP_ALIVE_TIMEOUT_MS = 1_200;
const REQUEST_TIMEOUT_MS = 4_000;

describe('the service closes silent and idle connections', () => {
  let service: RunningService;

  beforeAll(async () => {
    const flags = {
      port: '0', 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', config: 'examples/rules',
      'headers-timeout': `${HEADERS_TIMEOUT_MS}ms`, 'keep-alive-timeout': `${KEEP_ALIVE_TIMEOUT_MS}ms`, 'request-timeout': `${REQUEST_TIMEOUT_MS}ms`, 'max-requests-per-socket': '2',
    };
    service = await startService(resolveServiceOptions(flags, {}), pino({ level: 'silent' }));
  }, 20_000);
  afterAll(async () => service?.close());

  it('closes 50 connections that never send a byte within the headers timeout, on the decision and the admin listener', async () => {
    const started = Date.now();
    const sockets = await Promise.all(Array.from({ length: 50 }, (_, i) => opened(i % 2 === 0 ? service.httpPort! : service.adminPort)));
    const closes = await Promise.all(sockets.map((socket) => closedBy(socket, started)));
    for (const { afterMs, received } of closes) {
      expect(received).toBe('');
      expect(afterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
      // Generous for a loaded machine; without the fix they stay open until the test's own timeout.
      expect(afterMs).toBeLessThan(HEADERS_TIMEOUT_MS + 2_500);
    }
    expect((await fetch(`http://127.0.0.1:${service.httpPort}/healthz`)).status).toBe(200);
  }, 15_000);

  it('keeps an idle keep-alive connection past the headers timeout, and closes it after the keep-alive timeout', async () => {
    const socket = await opened(service.httpPort!);
    const closed = closedBy(socket, Date.now());
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const answeredAt = Date.now();
    const stillOpen = await Promise.race([closed.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), HEADERS_TIMEOUT_MS * 2))]);
    expect(stillOpen).toBe(true);
    const { received } = await closed;
    expect(received).toMatch(/^HTTP\/1\.1 200 OK/);
    expect(received).toMatch(/Keep-Alive: timeout=1/i);
    const idleMs = Date.now() - answeredAt;
    expect(idleMs).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 100);
    // node:http adds up to a second to the advertised keep-alive timeout before it closes.
    expect(idleMs).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + 3_000);
  }, 15_000);

  it('lets a slow but progressing upload finish within the request timeout', async () => {
    const body = JSON.stringify({ domain: 'api', descriptors: [{ user: 'slow-upload' }] }).padEnd(60, ' ');
    const socket = await opened(service.httpPort!);
    const closed = closedBy(socket, Date.now());
    socket.write(`POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
    // 60 bytes, one every 25 ms: 1.5 s, three times the headers timeout, well inside the request timeout.
    for (const char of body) {
      socket.write(char);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const { received } = await closed;
    expect(received).toMatch(/^HTTP\/1\.1 (200|429) /);
    expect(received).toContain('"overallCode"');
  }, 15_000);

  it('answers the last request a connection may carry with Connection: close', async () => {
    const socket = await opened(service.httpPort!);
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    let received = '';
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
        if ((received.match(/"status":"ok"/g) ?? []).length === 2) resolve();
      });
    });
    socket.destroy();
    const answers = received.split('HTTP/1.1 ').slice(1);
    expect(answers).toHaveLength(2);
    expect(answers[0]).toMatch(/Connection: keep-alive/i);
    expect(answers[1]).toMatch(/Connection: close/i);
  }, 15_000);
});
