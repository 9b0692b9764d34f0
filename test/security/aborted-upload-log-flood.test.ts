/**
 * Flooding the log with aborted uploads: each request whose client sent part of its body and then
 * reset the connection was logged as an error with its stack (5,000 aborted uploads: 5,000 lines,
 * 1.8 MB). A request its client ended is now a debug line, counted into one info line per 10 s
 * (and at shutdown) with the count by code; a failure of the service is still an error line.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';
import { capturedLogger } from '../support/logs.js';

const UPLOADS = 200;

/** Sends headers and the start of a body to `path`, then resets the connection. */
function abortedUpload(port: number, path: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"domain":"api",`);
      // Long enough for the service to start reading the body.
      setTimeout(() => {
        socket.resetAndDestroy();
        resolve();
      }, 30);
    });
    socket.on('error', () => resolve());
  });
}

describe('aborted uploads against tollgate serve', () => {
  let service: RunningService;
  const { logger, logs } = capturedLogger('info');
  let linesAtStart = 0;

  beforeAll(async () => {
    service = await startService(resolveServiceOptions({ port: '0', 'admin-port': '0', host: '127.0.0.1', config: 'examples/rules' }, {}), logger, { grpc: false });
    linesAtStart = logs.length;
  }, 20_000);
  afterAll(async () => service?.close());

  it(`leave no error line, and one summary counting them, for ${UPLOADS} aborted uploads`, async () => {
    const paths = ['/v1/check', '/json', '/v1/limit'];
    for (let sent = 0; sent < UPLOADS; sent += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, i) => abortedUpload(service.httpPort!, paths[(sent + i) % paths.length]!)));
    }
    // The service still answers, and has written nothing yet (the summary comes at the interval's end).
    expect((await fetch(`http://127.0.0.1:${service.httpPort}/healthz`)).status).toBe(200);
    const during = logs.slice(linesAtStart);
    expect(during.filter((line) => (line.level as number) >= 50)).toEqual([]);
    expect(during.length).toBeLessThanOrEqual(1);

    await service.close();
    const after = logs.slice(linesAtStart);
    const summaries = after.filter((line) => typeof line.clientGone === 'number');
    expect(summaries).toHaveLength(1);
    const counted = summaries[0]!.clientGone as number;
    // Some resets may land before the service has read a request: those are no request at all.
    expect(counted).toBeGreaterThanOrEqual(UPLOADS / 2);
    expect(counted).toBeLessThanOrEqual(UPLOADS);
    expect(summaries[0]).toMatchObject({ level: 30, byCode: { ECONNRESET: counted }, msg: `${counted} requests ended by their clients (aborted uploads, resets) in the last 10 s or less` });
    const bytes = after.reduce((sum, line) => sum + JSON.stringify(line).length + 1, 0);
    // The summary and the shutdown lines: a few hundred bytes, against ~370 bytes per aborted upload before.
    expect(bytes).toBeLessThan(2_000);
  }, 20_000);
});
