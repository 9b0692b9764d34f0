/**
 * The client against a real Tollgate: node:http apps with Tollgate's middleware on loopback, under a
 * controlled clock the middleware and the client share (the client's sleep moves it), so every
 * wait is exact and costs no real time. Where the server must keep refusing however long the
 * client waits, its clock stands still (`FROZEN`). What reached the server is counted by the server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { InvalidOptionError } from '../../src/errors.js';
import { ControlledTime, START, startFixedServer, startLimitedApp, type RecordingApp } from './support.js';

/** A server clock that never moves: a refused client stays refused, however long it waits. */
const FROZEN = { clock: () => START };
const apps: RecordingApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});
async function started(app: Promise<RecordingApp>): Promise<RecordingApp> {
  apps.push(await app);
  return apps.at(-1)!;
}

describe('backing off', () => {
  it('waits at least Retry-After before the retry, which the server then admits', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 2, window: '10s' }, { clock: time.now }));
    const retries: { attempt: number; delayMs: number; retryAfter: string | null }[] = [];
    const client = createClient({
      now: time.now,
      sleep: time.sleep,
      random: () => 0, // no jitter: the server's wait alone decides
      onRetry: ({ attempt, delayMs, response }) => retries.push({ attempt, delayMs, retryAfter: response.headers.get('retry-after') }),
    });
    for (let i = 0; i < 3; i++) expect((await client.fetch(app.url)).status).toBe(200);
    expect(retries).toEqual([{ attempt: 1, delayMs: 10_000, retryAfter: '10' }]);
    // The server's own record: the third request was refused at START, its retry came 10 s later.
    expect(app.arrivals.map((arrival) => [arrival.at - START, arrival.status])).toEqual([
      [0, 200],
      [0, 200],
      [0, 429],
      [10_000, 200],
    ]);
  });

  it('waits the jittered backoff when it is longer than Retry-After, and never less', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '2s' }, { clock: time.now }));
    const draws = [0.9, 0.1];
    const client = createClient({ now: time.now, sleep: time.sleep, random: () => draws.shift()!, backoffBaseMs: 10_000, backoffCapMs: 60_000, maxAttempts: 2 });
    expect((await client.fetch(app.url)).status).toBe(200);
    expect((await client.fetch(app.url)).status).toBe(200); // 429, then 0.9 × 10 s > Retry-After 2 s
    time.current = START + 20_000; // a fresh window, used by the next call's first attempt
    expect((await client.fetch(app.url)).status).toBe(200);
    expect((await client.fetch(app.url)).status).toBe(200); // 429, then 0.1 × 10 s < Retry-After 2 s: 2 s
    expect(time.sleeps).toEqual([9_000, 2_000]);
    expect(app.answered(429)).toBe(2);
  });

  it('draws each delay from [0, min(cap, base × 2^retry)) (full jitter), without a Retry-After', async () => {
    const app = await started(startFixedServer(503));
    const time = new ControlledTime();
    const client = createClient({ now: time.now, sleep: time.sleep, random: () => 0.5, backoffBaseMs: 100, backoffCapMs: 1_000, maxAttempts: 7, retryBudget: { maxTokens: 100 } });
    const response = await client.fetch(app.url);
    expect(response.status).toBe(503);
    expect(await response.text()).toBe('busy'); // the last response is returned whole
    expect(time.sleeps).toEqual([50, 100, 200, 400, 500, 500]);
    expect(app.arrivals).toHaveLength(7);
  });

  it('gives up after maxAttempts and returns the last 429', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '1h' }, FROZEN));
    const client = createClient({ now: time.now, sleep: time.sleep, maxAttempts: 3, maxDelayMs: 86_400_000 });
    await client.fetch(app.url);
    const response = await client.fetch(app.url);
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({ error: 'rate_limited' });
    expect(app.arrivals).toHaveLength(1 + 3);
  });

  it('returns the 429 at once when Retry-After is longer than maxDelayMs', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '1m' }, { clock: time.now }));
    const client = createClient({ now: time.now, sleep: time.sleep, maxDelayMs: 59_000 });
    await client.fetch(app.url);
    expect((await client.fetch(app.url)).status).toBe(429);
    expect(time.sleeps).toEqual([]);
    expect(app.arrivals).toHaveLength(2);
  });

  it('does not retry statuses it was not told to', async () => {
    const app = await started(startFixedServer(500));
    const time = new ControlledTime();
    expect((await createClient({ now: time.now, sleep: time.sleep }).fetch(app.url)).status).toBe(500);
    const retrying500 = createClient({ now: time.now, sleep: time.sleep, retryStatuses: [500], random: () => 0 });
    expect((await retrying500.fetch(app.url)).status).toBe(500);
    expect(app.arrivals).toHaveLength(1 + 3);
  });
});

describe('the retry budget', () => {
  it('holds retries across calls to maxTokens + ratio × calls, counted at the server', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '1h' }, FROZEN));
    const client = createClient({ now: time.now, sleep: time.sleep, maxAttempts: 5, maxDelayMs: 86_400_000, retryBudget: { ratio: 0.2, maxTokens: 3 } });
    await client.fetch(app.url); // the hour's one request
    const calls = 20;
    for (let i = 0; i < calls; i++) expect((await client.fetch(app.url)).status).toBe(429);
    const retries = app.arrivals.length - 1 - calls;
    // The first call spends the 3 tokens the budget starts with; 19 more calls earn 3.8: 3 retries.
    expect(retries).toBe(6);
    expect(retries).toBeLessThanOrEqual(3 + 0.2 * calls);
    expect(client.retryBudget).toBeCloseTo(0.8);
    // Unbudgeted, the same calls would have reached the server 5 times each.
    expect(app.arrivals.length).toBeLessThan(1 + calls * 5);
  });

  it('earns retries back as calls succeed', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 10, window: '1m' }, { clock: time.now }));
    const client = createClient({ now: time.now, sleep: time.sleep, retryBudget: { ratio: 0.5, maxTokens: 1 }, random: () => 0, maxDelayMs: 600_000 });
    for (let i = 0; i < 10; i++) await client.fetch(app.url);
    expect((await client.fetch(app.url)).status).toBe(200); // refused, retried at the next minute with the one token
    expect(client.retryBudget).toBe(0);
    time.current += 60_000;
    await client.fetch(app.url);
    expect(client.retryBudget).toBe(0.5);
    for (let i = 0; i < 8; i++) await client.fetch(app.url); // the budget refills, capped at maxTokens
    expect(client.retryBudget).toBe(1);
    expect(app.answered(429)).toBe(1);
  });
});

describe('only requests that can be sent again are retried', () => {
  it('POST is not retried by default; with retryMethods it is, and its body arrives whole each time', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '10s' }, { clock: time.now }));
    const init = { method: 'POST', body: JSON.stringify({ order: 42 }), headers: { 'content-type': 'application/json' } };
    await createClient({ now: time.now, sleep: time.sleep }).fetch(app.url, init);
    expect((await createClient({ now: time.now, sleep: time.sleep }).fetch(app.url, init)).status).toBe(429);
    const posting = createClient({ now: time.now, sleep: time.sleep, retryMethods: ['POST'] });
    expect((await posting.fetch(app.url, init)).status).toBe(200);
    expect(app.arrivals.map((arrival) => [arrival.method, arrival.body, arrival.status])).toEqual([
      ['POST', '{"order":42}', 200],
      ['POST', '{"order":42}', 429],
      ['POST', '{"order":42}', 429],
      ['POST', '{"order":42}', 200],
    ]);
  });

  it('a stream body, or a Request with a body, is sent once and not retried', async () => {
    const time = new ControlledTime();
    const app = await started(startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '10s' }, { clock: time.now }));
    const client = createClient({ now: time.now, sleep: time.sleep, retryMethods: ['POST', 'PUT'] });
    await client.fetch(app.url);
    const stream = new ReadableStream({ start: (controller) => (controller.enqueue(new TextEncoder().encode('streamed')), controller.close()) });
    expect((await client.fetch(app.url, { method: 'PUT', body: stream, duplex: 'half' } as RequestInit)).status).toBe(429);
    expect((await client.fetch(new Request(app.url, { method: 'POST', body: 'in a request' }))).status).toBe(429);
    expect(app.arrivals.map((arrival) => [arrival.method, arrival.body])).toEqual([
      ['GET', ''],
      ['PUT', 'streamed'],
      ['POST', 'in a request'],
    ]);
    expect(time.sleeps).toEqual([]);
  });
});

describe('options', () => {
  it.each<[string, unknown, RegExp]>([
    ['a misspelt option', { maxAttempt: 3 }, /unknown option "maxAttempt"; the options are fetch, maxAttempts/],
    ['maxAttempts 0', { maxAttempts: 0 }, /maxAttempts must be a whole number from 1 to 100, got 0/],
    ['a fractional backoff', { backoffBaseMs: 1.5 }, /backoffBaseMs must be a whole number/],
    ['a cap below the base', { backoffBaseMs: 500, backoffCapMs: 100 }, /backoffCapMs must be a whole number from 500/],
    ['a negative maxDelayMs', { maxDelayMs: -1 }, /maxDelayMs must be a whole number from 0/],
    ['a status out of range', { retryStatuses: [429, 700] }, /retryStatuses must hold HTTP statuses from 100 to 599, got 700 at \[1\]/],
    ['statuses not in an array', { retryStatuses: 429 }, /retryStatuses must be an array/],
    ['a method that is not a name', { retryMethods: ['GET', 'PO ST'] }, /retryMethods must hold method names/],
    ['a budget ratio that is not a number', { retryBudget: { ratio: '10%' } }, /retryBudget\.ratio must be a number from 0/],
    ['a misspelt budget option', { retryBudget: { max: 3 } }, /retryBudget: unknown option "max"; the options are ratio, maxTokens/],
    ['pacing as a string', { pacing: 'on' }, /pacing options must be an object like true or \{ maxHosts/],
    ['pacing.maxHosts 0', { pacing: { maxHosts: 0 } }, /pacing\.maxHosts must be a whole number from 1/],
    ['a hook that is not a function', { onRetry: 'log' }, /onRetry must be a function, got "log"/],
    ['options that are not an object', 3, /createClient options must be an object like/],
  ])('refuses %s', (_case, options, message) => {
    expect(() => createClient(options as never)).toThrow(InvalidOptionError);
    expect(() => createClient(options as never)).toThrow(message);
  });
});
