/**
 * For the client tests: a node:http app behind Tollgate's middleware on a free loopback port that
 * records every request that reached it (the controlled clock's time, method, body, status), a
 * plain server that always answers one status, and a controlled clock whose sleep moves it.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { rateLimit, type HeaderStyle } from '../../src/http/index.js';
import type { Policy } from '../../src/policy.js';

/** Epoch ms on a whole minute, so fixed windows start with the test. */
export const START = 1_800_000_000_000;

/** A clock that moves only when the client sleeps: waits are exact and cost no real time. */
export class ControlledTime {
  current = START;
  readonly sleeps: number[] = [];

  readonly now = (): number => this.current;

  readonly sleep = async (ms: number, signal: AbortSignal | undefined): Promise<void> => {
    signal?.throwIfAborted();
    this.sleeps.push(ms);
    this.current += ms;
  };
}

export interface Arrival {
  readonly at: number;
  readonly method: string;
  readonly body: string;
  status?: number;
}

export interface RecordingApp {
  readonly url: string;
  readonly arrivals: Arrival[];
  /** How many arrivals were answered with `status`. */
  answered(status: number): number;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

function recording(server: Server, url: string, arrivals: Arrival[], onClose: () => Promise<void> = async () => {}): RecordingApp {
  return {
    url,
    arrivals,
    answered: (status) => arrivals.filter((arrival) => arrival.status === status).length,
    close: async () => {
      await closeServer(server);
      await onClose();
    },
  };
}

/** Tollgate's middleware (one policy, every request on one key) in front of `200 ok`. */
export async function startLimitedApp(policy: Policy, options: { headers?: HeaderStyle; clock?: () => number } = {}): Promise<RecordingApp> {
  const clock = options.clock ?? Date.now;
  const limiter = rateLimit({ policy, headers: options.headers ?? 'both', key: () => 'client', ...(options.clock ? { clock } : {}) });
  const arrivals: Arrival[] = [];
  const server = createServer(async (req, res) => {
    const arrival: Arrival = { at: clock(), method: req.method ?? '', body: await readBody(req) };
    arrivals.push(arrival);
    res.on('finish', () => (arrival.status = res.statusCode));
    if (await limiter.handle(req, res)) res.end('ok');
  });
  return recording(server, await listen(server), arrivals, () => limiter.close());
}

/** A server that answers every request with `status` and `headers` (a 503 without Retry-After, say). */
export async function startFixedServer(status: number, headers: Record<string, string> = {}): Promise<RecordingApp> {
  const arrivals: Arrival[] = [];
  const server = createServer(async (req, res) => {
    arrivals.push({ at: Date.now(), method: req.method ?? '', body: await readBody(req), status });
    res.writeHead(status, headers).end('busy');
  });
  return recording(server, await listen(server), arrivals);
}
