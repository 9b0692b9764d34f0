/**
 * An upstream's `max_connections`: the gateway opens at most that many connections to it, the
 * requests past them wait for a free one (none is refused or lost), and one whose route timeout
 * runs out while it waits is answered 504 and never reaches the upstream.
 */
import type { Socket } from 'node:net';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../support/defer-upstream.js';
import { send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

/** The sockets `/pair` requests came on, and the answers held back. */
const pairSockets = new Set<Socket>();
const pairs: ServerResponse[] = [];
/** The most `/pair` requests the upstream held at once. */
let mostAtOnce = 0;
/** The `/single/held` answer, held until the test lets it go. */
let held: ServerResponse | undefined;

function upstreamHandler(req: IncomingMessage, res: ServerResponse): void {
  req.resume();
  if (req.url!.startsWith('/pair')) {
    // Answers only once it holds two at once: the gateway must keep two in flight.
    pairSockets.add(req.socket);
    pairs.push(res);
    mostAtOnce = Math.max(mostAtOnce, pairs.length);
    if (pairs.length === 2) for (const answer of pairs.splice(0)) answer.end('ok');
  } else if (req.url === '/single/held') {
    held = res;
  } else {
    res.end('ok');
  }
}

let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream(upstreamHandler);
  gateway = await startTestGateway(
    `listen: 0
upstreams:
  pair: { url: "${upstream.url}", max_connections: 2 }
  single: { url: "${upstream.url}", max_connections: 1 }
routes:
  - match: { prefix: /pair }
    upstream: pair
  - match: { path: /single/held }
    upstream: single
    timeout: 10s
  - match: { prefix: /single }
    upstream: single
    timeout: 300ms
`,
    undefined,
  );
});
afterAll(async () => {
  held?.end();
  await gateway?.close();
  await upstream?.close();
});

describe("an upstream's max_connections", () => {
  it('caps the connections to the upstream at 2 while 8 requests are in flight; every one is answered', async () => {
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => send(gateway.url(`/pair/${i}`))));
    expect(answers.map((answer) => answer.status)).toEqual(Array(8).fill(200));
    expect(pairSockets.size).toBe(2);
    expect(mostAtOnce).toBe(2);
  });

  it('answers 504 to a request whose route timeout runs out while it waits for a connection, and never forwards it', async () => {
    const first = send(gateway.url('/single/held'));
    await eventually(() => held !== undefined, 'the upstream to hold the first request');
    // The only connection is busy (the first request's route allows 10 s): this one waits in the
    // gateway until its own route's timeout (300 ms).
    const waiting = await send(gateway.url('/single/waited'));
    expect(waiting.status).toBe(504);
    expect(JSON.parse(waiting.body)).toMatchObject({ error: 'gateway_timeout' });
    held!.end('ok');
    expect((await first).status).toBe(200);
    // Queued after the timed-out one: once it is answered, the timed-out one has had its turn.
    expect((await send(gateway.url('/single/after'))).status).toBe(200);
    expect(upstream.requests.map((request) => request.url).filter((url) => url.startsWith('/single'))).toEqual(['/single/held', '/single/after']);
  });
});
