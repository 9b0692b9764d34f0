/**
 * The gateway as a reverse proxy, end to end over loopback: bodies intact both ways and streamed
 * (a 10 MB upload reaches the upstream while the client is still sending it, and a download, or a
 * small first event, with or without a Content-Length, reaches the client while the upstream is
 * still writing; a small binary answer, sent with its headers in one write, arrives intact),
 * hop-by-hop headers dropped both ways,
 * X-Forwarded-* set, upstream failures answered 502 / 504, a client that leaves aborts the upstream
 * request, and a path no route takes answered 404.
 */
import { createHash, randomBytes } from 'node:crypto';
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/redis.js';
import { send, startTestGateway, startUpstream, type TestGateway, type Upstream } from '../support/gateway.js';

const MB = 1024 * 1024;

/** What the upstream saw of the current upload. */
const upload = { received: 0, hash: '', done: false };
/** Resolves the current download's hold: the upstream writes the rest once the client has some. */
let releaseDownload: (() => void) | undefined;
/** Resolves the current event stream's hold: the upstream sends its second event once the client has the first. */
let releaseSecondEvent: (() => void) | undefined;
/** Every byte value, twice: a small binary answer (sent with its headers in one write). */
const ALL_BYTES = Buffer.from([...Array(512).keys()].map((i) => i % 256));
/** Set when an upstream request ends before its answer (the gateway aborted it). */
let abortedUpstream = false;

function upstreamHandler(req: IncomingMessage, res: ServerResponse): void {
  if (req.url === '/echo') {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => res.end(Buffer.concat(chunks)));
  } else if (req.url === '/upload') {
    Object.assign(upload, { received: 0, hash: '', done: false });
    const hash = createHash('sha256');
    req.on('data', (chunk: Buffer) => {
      upload.received += chunk.length;
      hash.update(chunk);
    });
    req.on('end', () => {
      Object.assign(upload, { hash: hash.digest('hex'), done: true });
      res.end(String(upload.received));
    });
  } else if (req.url === '/download') {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.write(Buffer.alloc(MB, 1));
    new Promise<void>((resolve) => (releaseDownload = resolve)).then(() => res.end(Buffer.alloc(MB, 2)));
  } else if (req.url === '/bytes') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': ALL_BYTES.length });
    res.end(ALL_BYTES);
  } else if (req.url === '/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    new Promise<void>((resolve) => (releaseSecondEvent = resolve)).then(() => res.end('data: two\n\n'));
  } else if (req.url === '/sized-events') {
    // A declared Content-Length, its body in two parts: the first is not the whole body.
    res.writeHead(200, { 'content-type': 'text/event-stream', 'content-length': 22 });
    res.write('data: one\n\n');
    new Promise<void>((resolve) => (releaseSecondEvent = resolve)).then(() => res.end('data: two\n\n'));
  } else if (req.url === '/hop') {
    res.writeHead(200, [
      'connection', 'x-upstream-hop',
      'x-upstream-hop', 'secret',
      'keep-alive', 'timeout=77',
      'proxy-authenticate', 'Basic',
      'x-kept', 'yes',
    ]);
    res.end(JSON.stringify(req.headers));
  } else if (req.url === '/hold') {
    req.resume();
    res.on('close', () => (abortedUpstream = !res.writableFinished));
  } else if (req.url === '/slow-body') {
    // The headers and a first chunk, then nothing: the route's timeout (300 ms) between chunks cuts it.
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first');
  } else if (req.url === '/slow-drip') {
    // Eight chunks 50 ms apart: longer than the route's timeout in all, never that long between two.
    res.writeHead(200, { 'content-type': 'text/plain' });
    let sent = 0;
    const drip = setInterval(() => {
      sent += 1;
      if (sent < 8) res.write(`${sent},`);
      else {
        clearInterval(drip);
        res.end('8');
      }
    }, 50);
  } else if (req.url?.startsWith('/slow')) {
    // Never answers: the gateway's route timeout must.
  } else {
    req.resume();
    res.end(JSON.stringify(req.headers));
  }
}

let upstream: Upstream;
let gateway: TestGateway;

beforeAll(async () => {
  upstream = await startUpstream(upstreamHandler);
  const deadPort = await freePort();
  gateway = await startTestGateway(
    `listen: 0
upstreams: { app: "${upstream.url}", dead: "http://127.0.0.1:${deadPort}" }
routes:
  - match: { prefix: /slow }
    upstream: app
    timeout: 300ms
  - match: { prefix: /refused }
    upstream: dead
  - match: { path: /only-post, method: POST }
    upstream: app
  - match: { prefix: /, headers: [{ name: x-blocked, present: true, invert_match: true }] }
    upstream: app
`,
    undefined,
  );
});
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
});

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('gateway proxying', () => {
  it('passes a request body to the upstream and its answer back, byte for byte', async () => {
    const body = randomBytes(64 * 1024).toString('base64');
    const answer = await send(gateway.url('/echo'), { method: 'POST', body, headers: { 'content-type': 'text/plain' } });
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(body);
  });

  it('invites the body of an Expect: 100-continue request, and passes it on', async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const req = httpRequest(gateway.url('/echo'), { method: 'POST', agent: false, headers: { expect: '100-continue', 'content-length': '5' } }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.on('continue', () => req.end('hello'));
    });
    expect(answer).toBe('hello');
  });

  it('streams a 10 MB upload: the upstream receives bytes before the client has sent them all, and gets every one', async () => {
    const half = randomBytes(5 * MB);
    const rest = randomBytes(5 * MB);
    const expected = createHash('sha256').update(half).update(rest).digest('hex');
    const answered = new Promise<string>((resolve, reject) => {
      const req = httpRequest(gateway.url('/upload'), { method: 'POST', agent: false, headers: { 'content-type': 'application/octet-stream' } }, (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.write(half);
      // The second half is sent only once the upstream has bytes: a buffering gateway never gets here.
      until(() => upload.received > 0, 'the upstream receives the upload').then(() => {
        expect(upload.done).toBe(false);
        req.end(rest);
      }, reject);
    });
    expect(await answered).toBe(String(10 * MB));
    expect(upload.hash).toBe(expected);
  });

  it('streams a download: the client receives bytes while the upstream is still writing', async () => {
    const received = await new Promise<number>((resolve, reject) => {
      httpRequest(gateway.url('/download'), { agent: false }, (res) => {
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          // Only once the client holds the first megabyte does the upstream write the second.
          if (bytes === 0) releaseDownload!();
          bytes += chunk.length;
        });
        res.on('end', () => resolve(bytes));
      })
        .on('error', reject)
        .end();
    });
    expect(received).toBe(2 * MB);
  });

  it('passes a small binary answer (every byte value) intact', async () => {
    const bytes = await new Promise<Buffer>((resolve, reject) => {
      httpRequest(gateway.url('/bytes'), { agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(Buffer.concat(chunks)));
      })
        .on('error', reject)
        .end();
    });
    expect(bytes.equals(ALL_BYTES)).toBe(true);
  });

  it.each(['/events', '/sized-events'])('passes a small first chunk on at once, while the upstream has not sent the rest (%s)', async (path) => {
    const events = await new Promise<string[]>((resolve, reject) => {
      httpRequest(gateway.url(path), { agent: false }, (res) => {
        const seen: string[] = [];
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          // The upstream sends its second event only once the client holds the first.
          if (seen.length === 0) releaseSecondEvent!();
          seen.push(text);
        });
        res.on('end', () => resolve(seen));
      })
        .on('error', reject)
        .end();
    });
    expect(events.join('')).toBe('data: one\n\ndata: two\n\n');
  });

  it('drops hop-by-hop headers both ways and sets X-Forwarded-For, -Proto and -Host', async () => {
    const answer = await send(gateway.url('/hop'), {
      headers: { connection: 'x-client-hop', 'x-client-hop': 'secret', te: 'trailers', 'proxy-authorization': 'Basic abc', 'keep-alive': 'timeout=9', 'x-forwarded-for': '203.0.113.9', 'x-kept': 'yes' },
    });
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body) as Record<string, string>;
    for (const name of ['x-client-hop', 'te', 'proxy-authorization', 'keep-alive']) expect(seen, name).not.toHaveProperty(name);
    expect(seen['x-kept']).toBe('yes');
    expect(seen['x-forwarded-for']).toBe('203.0.113.9, 127.0.0.1');
    expect(seen['x-forwarded-proto']).toBe('http');
    expect(seen['x-forwarded-host']).toBe(`127.0.0.1:${gateway.gateway.port}`);
    for (const name of ['x-upstream-hop', 'proxy-authenticate']) expect(answer.headers, name).not.toHaveProperty(name);
    expect(answer.headers['keep-alive']).not.toBe('timeout=77');
    expect(answer.headers['x-kept']).toBe('yes');
  });

  it('answers 502 with a JSON body when the upstream refuses the connection', async () => {
    const answer = await send(gateway.url('/refused'));
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'bad_gateway', message: expect.stringContaining('refused') });
  });

  it('answers 504 with a JSON body when the upstream does not answer within the route timeout', async () => {
    const started = Date.now();
    const answer = await send(gateway.url('/slow'));
    expect(answer.status).toBe(504);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'gateway_timeout' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it("cuts an answer short when the upstream sends nothing for the route's timeout between two chunks, not when it keeps sending", async () => {
    const read = (path: string) =>
      new Promise<{ text: string; complete: boolean }>((resolve, reject) => {
        httpRequest(gateway.url(path), { agent: false }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('close', () => resolve({ text, complete: res.complete }));
        })
          .on('error', reject)
          .end();
      });
    expect(await read('/slow-body')).toEqual({ text: 'first', complete: false });
    expect(await read('/slow-drip')).toEqual({ text: '1,2,3,4,5,6,7,8', complete: true });
  });

  it('aborts the upstream request when the client goes away', async () => {
    abortedUpstream = false;
    const count = upstream.requests.length;
    const req = httpRequest(gateway.url('/hold'), { agent: false });
    req.on('error', () => {});
    req.end();
    await until(() => upstream.requests.length > count, 'the upstream receives the request');
    req.destroy();
    await until(() => abortedUpstream, 'the upstream request is aborted');
  });

  it('answers 404 when no route takes the request (method, or a header matcher, included)', async () => {
    // The last route takes any path, unless the request carries x-blocked.
    const blocked = { 'x-blocked': '1' };
    expect((await send(gateway.url('/only-post'), { headers: blocked })).status).toBe(404);
    expect((await send(gateway.url('/only-post'), { method: 'POST', headers: blocked })).status).toBe(200);
    expect((await send(gateway.url('/anything'))).status).toBe(200);
    const refused = await send(gateway.url('/anything'), { headers: blocked });
    expect(refused.status).toBe(404);
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'not_found' });
  });
});
