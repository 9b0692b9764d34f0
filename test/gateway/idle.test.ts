/**
 * The gateway's idle sweep (src/gateway/idle.ts) on a real node:http server, with a 200 ms idle
 * time: a connection that stalls in the middle of its upload is closed; one that keeps sending,
 * slowly, for longer than that in all, is not.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeIdleConnections } from '../../src/gateway/idle.js';
import { closedBy, opened } from '../support/sockets.js';

const IDLE_MS = 200;

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer((req, res) => {
    let received = 0;
    req.on('data', (chunk: Buffer) => (received += chunk.length));
    req.on('end', () => res.end(`got ${received}`));
  });
  closeIdleConnections(server, IDLE_MS);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('the idle sweep', () => {
  it('closes a connection that stops sending in the middle of its upload', async () => {
    const socket = await opened(port);
    const started = Date.now();
    const closed = closedBy(socket, started);
    socket.write('POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 100\r\n\r\nthe first bytes');
    const { afterMs, received } = await closed;
    // Closed by the sweep (no answer: the request never ended), well before any other timeout.
    expect(received).toBe('');
    expect(afterMs).toBeLessThan(5_000);
  });

  it('keeps a connection that sends a byte every 50 ms, for 1 s in all', async () => {
    const socket = await opened(port);
    const closed = closedBy(socket, Date.now());
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.write('POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 20\r\n\r\n');
    for (let sent = 0; sent < 20; sent++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      socket.write('x');
    }
    await new Promise<void>((resolve) => socket.once('data', () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK[\s\S]*got 20$/);
    expect(socket.destroyed).toBe(false);
    socket.destroy();
    await closed;
  });
});
