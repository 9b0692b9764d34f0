/**
 * A real node:http upstream for the deferred queue's tests: records every request it gets (method,
 * path, headers, body, arrival time) and answers what the test's `respond` says, after an optional delay.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** performance.now() when the whole request had arrived. */
  readonly at: number;
}

export interface Reply {
  readonly status: number;
  readonly body?: string | Buffer;
  readonly headers?: Record<string, string>;
  /** Wait this long before answering (a slow upstream). */
  readonly delayMs?: number;
  /** Never answer (until the server closes). */
  readonly hang?: boolean;
}

export interface Upstream {
  readonly url: string;
  readonly received: ReceivedRequest[];
  /** Idempotency keys in arrival order. */
  keys(): string[];
  close(): Promise<void>;
}

export async function startUpstream(respond: (request: ReceivedRequest, index: number) => Reply = () => ({ status: 200, body: 'ok' })): Promise<Upstream> {
  const received: ReceivedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: performance.now() };
      received.push(request);
      const reply = respond(request, received.length - 1);
      if (reply.hang === true) return;
      const answer = (): void => {
        res.writeHead(reply.status, reply.headers ?? {});
        res.end(reply.body ?? '');
      };
      if (reply.delayMs === undefined) answer();
      else {
        const timer = setTimeout(() => {
          timers.delete(timer);
          answer();
        }, reply.delayMs);
        timers.add(timer);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    keys: () => received.map((request) => String(request.headers['idempotency-key'])),
    close: () => {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls `check` every 20 ms until it holds (or throws after `timeoutMs`). */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
