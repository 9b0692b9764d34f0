/**
 * For the express-rate-limit compatibility tests: Express 5 apps with express-rate-limit in front,
 * listening on loopback, driven over HTTP with fetch under a controlled clock (vitest fakes only
 * `Date`, which express-rate-limit, its MemoryStore and the TollgateStore `clock` read), and
 * scripts of requests played on them to compare what clients see.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type ErrorRequestHandler } from 'express';
import { rateLimit, type Options, type RateLimitRequestHandler, type Store as RateLimitStore } from 'express-rate-limit';
import { afterAll, beforeAll, vi } from 'vitest';
import { memoryStore, type Store } from '../../src/index.js';
import type { RedisTopologies } from './redis-topologies.js';

const servers: Server[] = [];

/** Closes every app started so far. */
export async function closeApps(): Promise<void> {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

export interface Reply {
  readonly status: number;
  readonly body: string;
  /** The rate limit headers: `X-RateLimit-*`, `RateLimit*`, `Retry-After`. */
  readonly headers: Record<string, string>;
}

export interface TestApp {
  readonly limiters: readonly RateLimitRequestHandler[];
  /** What express-rate-limit logged (validation errors and warnings, store errors it passed over). */
  readonly logged: unknown[];
  /** Errors that reached Express's error handler. */
  readonly failures: unknown[];
  /** GET `path` as `client` (the key), with optional extra headers. */
  get(path: string, client: string, headers?: Record<string, string>): Promise<Reply>;
  /** Waits for the refunds (decrement) the last responses started. */
  settle(): Promise<void>;
}

const RATE_LIMIT_HEADER = /^(x-ratelimit-|ratelimit|retry-after$)/;

/**
 * An app with one express-rate-limit per entry of `limiters`, in that order. Routes: `/ok` (200),
 * `/fail` (500), `/late/:status/:ms` (moves the fake clock on by `ms` before answering `status`).
 */
export async function startApp(limiters: readonly Partial<Options>[]): Promise<TestApp> {
  const logged: unknown[] = [];
  const failures: unknown[] = [];
  const pending: Promise<unknown>[] = [];
  const handlers = limiters.map((options) => {
    if (options.store !== undefined) trackRefunds(options.store as RateLimitStore, pending);
    return rateLimit({
      keyGenerator: (request) => request.get('x-client') ?? 'anonymous',
      logger: { error: (error) => logged.push(error), warn: (error) => logged.push(error) },
      ...options,
    });
  });
  const app = express();
  for (const handler of handlers) app.use(handler);
  app.get('/ok', (_request, response) => {
    response.send('ok');
  });
  app.get('/fail', (_request, response) => {
    response.status(500).send('failed');
  });
  app.get('/late/:status/:ms', (request, response) => {
    vi.setSystemTime(Date.now() + Number(request.params.ms));
    response.status(Number(request.params.status)).send('late');
  });
  const onError: ErrorRequestHandler = (error, _request, response, _next) => {
    failures.push(error);
    response.status(500).send('error');
  };
  app.use(onError);
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    limiters: handlers,
    logged,
    failures,
    async get(path, client, headers = {}) {
      const response = await fetch(base + path, { headers: { 'x-client': client, ...headers } });
      const picked: Record<string, string> = {};
      response.headers.forEach((value, name) => {
        if (RATE_LIMIT_HEADER.test(name)) picked[name] = value;
      });
      return { status: response.status, body: await response.text(), headers: picked };
    },
    async settle() {
      // express-rate-limit refunds on the response's 'finish', which may come after the client
      // has the response: let those callbacks run, then wait for the refunds they started.
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      await Promise.allSettled(pending.splice(0));
    },
  };
}

/** Records each `decrement` call's promise in `pending` (the store itself is unchanged). */
function trackRefunds(store: RateLimitStore, pending: Promise<unknown>[]): void {
  const decrement = store.decrement.bind(store);
  store.decrement = (key: string) => {
    const refund = Promise.resolve(decrement(key));
    pending.push(refund);
    return refund;
  };
}

/** One step of a script: a request, or a call on the app's first limiter; `at` is ms after the start. */
export type Step =
  | { readonly at: number; readonly get: string; readonly client?: string; readonly headers?: Record<string, string> }
  | { readonly at: number; readonly resetKey: string }
  | { readonly at: number; readonly getKey: string };

/** What one step showed: a reply, or what `getKey` answered (reset time in ms). */
export type Seen = Reply | { totalHits: number; resetTime: number | undefined } | 'none' | 'reset';

/** Plays `steps` on `app`, the clock at `start + at` for each, and returns what each showed. */
export async function play(app: TestApp, start: number, steps: readonly Step[]): Promise<Seen[]> {
  const seen: Seen[] = [];
  for (const step of steps) {
    vi.setSystemTime(start + step.at);
    if ('get' in step) {
      seen.push(await app.get(step.get, step.client ?? 'alice', step.headers));
    } else if ('resetKey' in step) {
      await app.limiters[0]!.resetKey(step.resetKey);
      seen.push('reset');
    } else {
      const info = await app.limiters[0]!.getKey(step.getKey);
      seen.push(info === undefined ? 'none' : { totalHits: info.totalHits, resetTime: info.resetTime?.getTime() });
    }
    await app.settle();
  }
  return seen;
}

/** The Tollgate stores TollgateStore is tested on, by name. */
export type Backend = 'memory' | 'single' | 'cluster';

/** For `describe.each` / `it.each`: each backend with a readable name. */
export const BACKENDS: readonly { readonly name: string; readonly store: Backend }[] = [
  { name: 'memory store', store: 'memory' },
  { name: 'single Redis', store: 'single' },
  { name: 'Redis Cluster', store: 'cluster' },
];

/**
 * One Tollgate store per backend, for a file's tests: a memory store, and a connection to the single
 * Redis and to the Cluster of `redis` (available once the tests run). Closes them and every app after.
 */
export function useBackends(redis: RedisTopologies): Record<Backend, Store> {
  const stores: Partial<Record<Backend, Store>> = { memory: memoryStore({ sweepIntervalMs: 0 }) };
  beforeAll(async () => {
    stores.single = await redis.open({ url: redis.single.url });
    stores.cluster = await redis.open({ cluster: redis.cluster.nodes });
  });
  afterAll(async () => {
    await closeApps();
    await stores.memory!.close();
  });
  return stores as Record<Backend, Store>;
}

let prefixes = 0;

/** A TollgateStore prefix no other test uses. */
export function uniquePrefix(label: string): string {
  prefixes += 1;
  return `${label}:${process.pid}:${Date.now()}:${prefixes}:`;
}
