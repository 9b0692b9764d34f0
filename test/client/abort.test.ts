/**
 * AbortSignal: aborting while the client waits (a backoff after a 429, or its pacing turn) rejects
 * at once with the signal's reason, and no further request reaches the server. Real timers here
 * (the client's default sleep is what is under test), kept under 2 s.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { START, startFixedServer, startLimitedApp, type RecordingApp } from './support.js';

const apps: RecordingApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

async function waitFor(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Rejection of `promise`, and how long after `since` it came. */
async function rejection(promise: Promise<unknown>, since: number): Promise<{ error: unknown; afterMs: number }> {
  try {
    await promise;
  } catch (error) {
    return { error, afterMs: Date.now() - since };
  }
  throw new Error('expected a rejection');
}

describe('aborting', () => {
  it('during a backoff: rejects at once with an AbortError, and the retry is never sent', async () => {
    // The server's clock stands still: its answer (429, Retry-After 1) cannot change with real time.
    const app = await startLimitedApp({ algorithm: 'fixed-window', limit: 1, window: '1s' }, { clock: () => START });
    apps.push(app);
    const client = createClient();
    await client.fetch(app.url);
    const controller = new AbortController();
    const call = client.fetch(app.url, { signal: controller.signal });
    await waitFor(() => app.answered(429) === 1, 'the 429'); // the client now sleeps ~1 s (Retry-After)
    const abortedAt = Date.now();
    controller.abort();
    const { error, afterMs } = await rejection(call, abortedAt);
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe('AbortError');
    expect(afterMs).toBeLessThan(500);
    // Past the moment the retry was due: nothing more arrived.
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(app.arrivals).toHaveLength(2);
  });

  it("during a pacing wait: rejects with the signal's own reason, sending nothing", async () => {
    const app = await startFixedServer(429, { 'retry-after': '30' });
    apps.push(app);
    const client = createClient({ pacing: true, maxAttempts: 1 });
    await client.fetch(app.url); // the host is now held for 30 s
    const controller = new AbortController();
    const call = client.fetch(app.url, { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const reason = new Error('user went away');
    const abortedAt = Date.now();
    controller.abort(reason);
    const { error, afterMs } = await rejection(call, abortedAt);
    expect(error).toBe(reason);
    expect(afterMs).toBeLessThan(500);
    expect(app.arrivals).toHaveLength(1);
  });

  it('already aborted: rejects without sending', async () => {
    const app = await startFixedServer(200);
    apps.push(app);
    const signal = AbortSignal.abort();
    await expect(createClient().fetch(app.url, { signal })).rejects.toMatchObject({ name: 'AbortError' });
    await expect(createClient().fetch(new Request(app.url, { signal }))).rejects.toMatchObject({ name: 'AbortError' });
    expect(app.arrivals).toHaveLength(0);
  });

  it('an injected sleep that ignores the signal still sends nothing after the abort', async () => {
    const app = await startFixedServer(503);
    apps.push(app);
    const controller = new AbortController();
    const client = createClient({ sleep: async () => controller.abort(), random: () => 0 });
    await expect(client.fetch(app.url, { signal: controller.signal })).rejects.toMatchObject({ name: 'AbortError' });
    expect(app.arrivals).toHaveLength(1);
  });
});
