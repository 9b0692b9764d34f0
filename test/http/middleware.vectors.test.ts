/**
 * The conformance vectors played through the HTTP middleware, over real HTTP, on the memory store
 * and on Redis: every decision the middleware makes is the limiter's, so a bypass of the limiter
 * (a second engine, a missed `limit: 0`, a later clock reading) fails here. Each `limit` step is
 * one request; what the vectors expect is compared with what a client sees in the headers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rateLimit, type RateLimitMiddleware } from '../../src/http/index.js';
import { createLimiter, memoryStore, redisStore, type Decision, type Store } from '../../src/index.js';
import { useRedisServer } from '../support/redis-topologies.js';
import { loadVectors, type VectorCase, type VectorStep } from '../support/vectors.js';

/** The time the next request is decided at: each step's `now`, through the middleware's clock. */
let stepNow = 0;

/** One server for every case: `x-case` picks the case's middleware, `x-key` and `x-cost` its key and cost. */
async function serveCases(store: Store, cases: readonly VectorCase[]): Promise<{ url: string; close(): Promise<void> }> {
  const middlewares: RateLimitMiddleware[] = cases.map((vectorCase) =>
    rateLimit({
      store,
      name: 'v',
      policy: vectorCase.policy,
      headers: 'both',
      clock: () => stepNow,
      // A vector checks what the store decides, not how fast (as test/support/vectors.ts): past the
      // 50 ms default, a busy machine's slow answer would be the failure mode's.
      deadlineMs: 5_000,
      key: (req) => String(req.headers['x-key']),
      cost: (req) => Number(req.headers['x-cost']),
      onError: (error) => {
        throw error;
      },
    }),
  );
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    middlewares[Number(req.headers['x-case'])]!.handle(req, res).then(
      (admitted) => admitted && res.writeHead(200).end('ok'),
      (error: unknown) => res.writeHead(500).end(String(error)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** What a client can read of `expected` in a response decided at `now`. */
function visible(expected: Partial<Decision>, now: number): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  if (expected.allowed !== undefined) out.status = expected.allowed ? 200 : 429;
  if (expected.limit !== undefined) out['x-ratelimit-limit'] = String(expected.limit);
  if (expected.remaining !== undefined) out['x-ratelimit-remaining'] = String(expected.remaining);
  if (expected.resetAt !== undefined) {
    out['x-ratelimit-reset'] = String(Math.ceil(Math.max(expected.resetAt, now) / 1000));
    out.t = Math.max(0, Math.ceil((expected.resetAt - now) / 1000));
  }
  if (expected.retryAfter !== undefined) out['retry-after'] = expected.retryAfter === 0 ? null : String(Math.max(1, Math.ceil(expected.retryAfter / 1000)));
  return out;
}

function seen(response: Response, expected: Record<string, unknown>): Record<string, string | number | null> {
  const out: Record<string, string | number | null> = {};
  for (const field of Object.keys(expected)) {
    if (field === 'status') out.status = response.status;
    else if (field === 't') out.t = Number(/;t=(\d+)/.exec(response.headers.get('ratelimit') ?? '')?.[1]);
    else out[field] = response.headers.get(field);
  }
  return out;
}

function describeStore(name: string, open: () => Promise<Store>): void {
  describe(`the middleware plays the conformance vectors (${name})`, () => {
    let store: Store;
    const vectors = loadVectors();
    const cases = vectors.flatMap(({ file, vectors: v }) => v.cases.map((vectorCase) => ({ file, vectorCase })));
    let app: { url: string; close(): Promise<void> };
    beforeAll(async () => {
      store = await open();
      app = await serveCases(store, cases.map(({ vectorCase }) => vectorCase));
    }, 60_000);
    afterAll(async () => {
      await app?.close();
    });

    cases.forEach(({ file, vectorCase }, caseIndex) => {
      it(`${file}: ${vectorCase.name}`, async () => {
        const key = `${name}:${caseIndex}:${Math.random().toString(36).slice(2)}`;
        const limiter = createLimiter({ store });
        for (const [stepIndex, step] of vectorCase.steps.entries()) {
          await playStep(app.url, caseIndex, key, step, `step ${stepIndex} (${step.op ?? 'limit'} at now=${step.now}, cost=${step.cost ?? 1})`, () =>
            limiter.reset(`v|${key}`, vectorCase.policy),
          );
        }
      });
    });
  });
}

async function playStep(url: string, caseIndex: number, key: string, step: VectorStep, where: string, reset: () => Promise<void>): Promise<void> {
  if (step.op === 'reset') return reset();
  // A peek changes nothing and has no HTTP form: the limiter's own vector test covers it.
  if (step.op === 'peek') return;
  stepNow = step.now;
  const response = await fetch(`${url}/`, { headers: { 'x-case': String(caseIndex), 'x-key': key, 'x-cost': String(step.cost ?? 1) } });
  await response.arrayBuffer();
  if (step.expect === undefined) return;
  const expected = visible(step.expect, step.now);
  expect(seen(response, expected), where).toEqual(expected);
}

describeStore('memory', async () => memoryStore({ sweepIntervalMs: 0 }));

const redis = useRedisServer();
describeStore('redis', async () => {
  const store = redisStore({ url: redis.url });
  redis.stores.push(store);
  await store.ready();
  return store;
});
