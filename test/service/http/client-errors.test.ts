/**
 * A client's protocol errors on a listener with silent connections closed (`closeSilentConnections`,
 * G-SERVICE-3): a connection that sent nothing is closed unanswered even when node:http's own
 * headers check reaches it first (it would answer 408: the race a busy machine lost), and every other
 * client error gets node:http's own answer, byte for byte, as without the listener.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { closeSilentConnections } from '../../../src/service/http/close.js';
import { closedBy, opened } from '../../support/sockets.js';

const HEADERS_TIMEOUT_MS = 200;
const servers: Server[] = [];

/** A node:http server whose own headers check runs every 25 ms, with or without the silent close. */
async function listening(silentClose: { timeoutMs: number } | undefined): Promise<number> {
  const server = createServer({ headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 10_000, connectionsCheckingInterval: 25, maxHeaderSize: 1024 }, (_req, res) => res.end('ok'));
  if (silentClose !== undefined) closeSilentConnections(server, silentClose.timeoutMs);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** What a fresh connection receives before it closes, after sending `bytes` (nothing when empty). */
async function answerTo(port: number, bytes: string): Promise<string> {
  const socket = await opened(port);
  const closed = closedBy(socket, Date.now());
  if (bytes !== '') socket.write(bytes);
  return (await closed).received;
}

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('client errors on a listener that closes silent connections', () => {
  it("a silent connection node's own headers check reaches first is closed unanswered (node alone answers 408)", async () => {
    // The silent-close timer a minute away: node's check (every 25 ms past 200 ms) comes first.
    const withListener = await listening({ timeoutMs: 60_000 });
    const bare = await listening(undefined);
    expect(await answerTo(bare, '')).toBe('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
    expect(await answerTo(withListener, '')).toBe('');
  });

  it("every other client error gets node's own answer, the same bytes as without the listener", async () => {
    const withListener = await listening({ timeoutMs: 60_000 });
    const bare = await listening(undefined);
    const cases: [string, string][] = [
      // Headers begun and never finished: the headers timeout.
      ['GET / HTTP/1.1\r\nHost: x\r\n', 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n'],
      // Headers over maxHeaderSize.
      [`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(2048)}\r\n\r\n`, 'HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n'],
      // Not HTTP.
      ['HELLO\r\n\r\n', 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'],
    ];
    for (const [sent, expected] of cases) {
      expect(await answerTo(bare, sent)).toBe(expected);
      expect(await answerTo(withListener, sent)).toBe(expected);
    }
  });

  it('an error while an answer is under way on the connection writes no answer of its own (as node does)', async () => {
    const withListener = await listening({ timeoutMs: 60_000 });
    const bare = await listening(undefined);
    // A request, then garbage in the same packet: the error comes while the answer is in flight.
    const sent = 'GET / HTTP/1.1\r\nHost: x\r\n\r\nHELLO\r\n\r\n';
    const withoutDate = (text: string): string => text.replace(/^Date: .*\r\n/m, '');
    const expected = withoutDate(await answerTo(bare, sent));
    expect(expected).toMatch(/^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\nok$/);
    expect(withoutDate(await answerTo(withListener, sent))).toBe(expected);
  });
});
