/**
 * The service's error answers over real HTTP (the CLI in a child process, driven over loopback):
 * a body over the limit gets a 413 the client can read (not a reset), and every error body carries
 * `{ error, code, message }`.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { serviceForSuite, type ServiceProcess } from '../../support/service.js';

const MiB = 1024 * 1024;
const TOKEN = 'test-admin-token-0123456789';

interface StreamedReply {
  status: number | undefined;
  headers: IncomingHttpHeaders;
  body: string;
  /** Bytes of the request body the client managed to write. */
  written: number;
  /** An error the client saw (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** ms from the first byte written until the connection closed. */
  closedAfterMs: number;
}

/**
 * POSTs `total` bytes with node:http as fast as the socket takes them (chunked, or with a
 * Content-Length), and reads whatever answer comes.
 */
function streamBody(port: number, path: string, total: number, framing: 'chunked' | 'content-length'): Promise<StreamedReply> {
  return new Promise((resolve) => {
    const started = Date.now();
    const reply: StreamedReply = { status: undefined, headers: {}, body: '', written: 0, error: undefined, closedAfterMs: 0 };
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (framing === 'content-length') headers['content-length'] = total;
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers });
    req.on('response', (response) => {
      reply.status = response.statusCode;
      reply.headers = response.headers;
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (reply.body += chunk));
    });
    req.on('error', (error: NodeJS.ErrnoException) => (reply.error ??= error.code ?? error.message));
    req.on('socket', (socket) =>
      socket.on('close', () => {
        reply.closedAfterMs = Date.now() - started;
        resolve(reply);
      }),
    );
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const pump = (): void => {
      while (reply.written < total && !req.destroyed) {
        reply.written += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!req.destroyed) req.end();
    };
    pump();
  });
}

/**
 * A client that never stops uploading, whatever the server answers (node:http's client gives up
 * its upload once a `Connection: close` answer ends): a raw socket sending an endless chunked body,
 * as fast as it can or, past `trickleAfter` bytes, 1 KiB every 20 ms. Resolves when the server
 * closes the connection, with everything it answered.
 */
function endlessUpload(port: number, path: string, trickleAfter = Infinity): Promise<{ answer: string; written: number; closedAfterMs: number }> {
  return new Promise((resolve) => {
    const started = Date.now();
    let answer = '';
    let written = 0;
    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => (answer += text));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ answer, written, closedAfterMs: Date.now() - started }));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const frame = (size: number): Buffer => Buffer.concat([Buffer.from(`${size.toString(16)}\r\n`), Buffer.alloc(size, 'x'), Buffer.from('\r\n')]);
    const fast = frame(64 * 1024);
    const slow = frame(1024);
    const pump = (): void => {
      while (!socket.destroyed) {
        if (written >= trickleAfter) {
          written += 1024;
          socket.write(slow);
          setTimeout(pump, 20);
          return;
        }
        written += 64 * 1024;
        if (!socket.write(fast)) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
}

/** Status, headers and JSON body of a raw HTTP/1.1 answer. */
function parseAnswer(answer: string): { status: number; headers: string; body: unknown } {
  const [head = '', body = ''] = answer.split('\r\n\r\n');
  return { status: Number(head.split(' ')[1]), headers: `${head.toLowerCase()}\r\n`, body: JSON.parse(body) };
}

/** Sends every request on one connection without waiting for answers (HTTP/1.1 pipelining); resolves with their statuses. */
function pipeline(port: number, requests: { method: string; path: string; headers: Record<string, string>; body: string }[]): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const statuses: number[] = [];
    let pending = '';
    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('latin1');
    socket.on('error', reject);
    socket.on('data', (text: string) => {
      pending += text;
      for (let headEnd = pending.indexOf('\r\n\r\n'); headEnd >= 0; headEnd = pending.indexOf('\r\n\r\n')) {
        const head = pending.slice(0, headEnd);
        const end = headEnd + 4 + Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
        if (pending.length < end) break;
        statuses.push(Number(head.split(' ')[1]));
        pending = pending.slice(end);
      }
      if (statuses.length === requests.length) {
        socket.end();
        resolve(statuses);
      }
    });
    const text = requests
      .map(({ method, path, headers, body }) => {
        const lines = Object.entries({ host: 'x', 'content-length': String(Buffer.byteLength(body)), ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
        return `${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n${body}`;
      })
      .join('');
    socket.write(text);
  });
}

describe('tollgate serve: error answers', () => {
  const running = serviceForSuite(['--config', 'examples/rules', '--admin-token', TOKEN]);
  let service: ServiceProcess;
  beforeAll(() => void (service = running()));

  it.each(['chunked', 'content-length'] as const)('a 10 MB body (%s) is answered 413 with a JSON body the client reads, then the connection closes', async (framing) => {
    const reply = await streamBody(service.httpPort, '/json', 10 * MiB, framing);
    expect(reply.status).toBe(413);
    expect(reply.headers.connection).toBe('close');
    expect(JSON.parse(reply.body)).toMatchObject({ error: 'payload_too_large', code: 'ERR_TOLLGATE_BODY_TOO_LARGE', message: expect.stringMatching(/at most 1048576 bytes/) });
    expect(reply.error).toBeUndefined();
    // The service is still there.
    expect((await fetch(service.url('/healthz'))).status).toBe(200);
  });

  it('a client that sends Expect: 100-continue with a 10 MB Content-Length gets the 413 instead, and never sends the body', async () => {
    const reply = await new Promise<{ status: number | undefined; body: string; continued: boolean }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: service.httpPort,
        path: '/json',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': 10 * MiB, expect: '100-continue' },
      });
      let continued = false;
      req.on('continue', () => {
        continued = true;
        req.end(Buffer.alloc(10 * MiB, 'x'));
      });
      req.on('response', (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          resolve({ status: response.statusCode, body, continued });
          req.destroy();
        });
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(reply.continued).toBe(false);
    expect(reply.status).toBe(413);
    expect(JSON.parse(reply.body)).toMatchObject({ code: 'ERR_TOLLGATE_BODY_TOO_LARGE', message: 'the body is 10485760 bytes; at most 1048576 bytes are accepted' });
  });

  it('after a 413 it reads away at most 16 MiB more of an endless body, then closes', async () => {
    const { answer, written } = await endlessUpload(service.httpPort, '/v1/check');
    expect(parseAnswer(answer)).toMatchObject({ status: 413, body: { code: 'ERR_TOLLGATE_BODY_TOO_LARGE' } });
    expect(parseAnswer(answer).headers).toMatch(/\r\nconnection: close\r\n/);
    // 1 MiB read, 16 MiB thrown away, and whatever the sockets' buffers held when it closed.
    expect(written).toBeGreaterThan(17 * MiB);
    expect(written).toBeLessThan(48 * MiB);
  });

  it('after a 413 it waits at most 2 s for a trickling body to end, then closes', async () => {
    const { answer, closedAfterMs } = await endlessUpload(service.httpPort, '/json', 2 * MiB);
    expect(parseAnswer(answer)).toMatchObject({ status: 413, body: { code: 'ERR_TOLLGATE_BODY_TOO_LARGE' } });
    expect(closedAfterMs).toBeGreaterThanOrEqual(1_900);
    expect(closedAfterMs).toBeLessThan(5_000);
  });

  it.each([
    ['invalid JSON', 'POST', '/json', '{"domain": ', {}, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_JSON', /not valid JSON/],
    ['a bad /v1/limit body', 'POST', '/v1/limit', '[1]', {}, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_REQUEST', /the body must be \{ key, policy, cost\? \}, got an array/],
    ['no admin token', 'GET', '/v1/keys/blocked', undefined, {}, 401, 'unauthorized', 'ERR_TOLLGATE_UNAUTHORIZED', /admin token is required/],
    ['a wrong admin token', 'GET', '/v1/keys/blocked', undefined, { authorization: 'Bearer nope' }, 401, 'unauthorized', 'ERR_TOLLGATE_UNAUTHORIZED', /admin token/],
    ['a missing query', 'GET', '/v1/keys', undefined, { authorization: `Bearer ${TOKEN}` }, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_REQUEST', /give key, algorithm, limit and window/],
    ['an unknown path', 'GET', '/nope', undefined, {}, 404, 'not_found', 'ERR_TOLLGATE_NOT_FOUND', /GET \/nope is not served/],
    ['a wrong method', 'GET', '/json', undefined, {}, 405, 'method_not_allowed', 'ERR_TOLLGATE_METHOD_NOT_ALLOWED', /GET \/json is not served; \/json takes POST/],
    ['a declared 2 MiB body', 'POST', '/json', 'x'.repeat(2 * MiB), {}, 413, 'payload_too_large', 'ERR_TOLLGATE_BODY_TOO_LARGE', /the body is 2097152 bytes; at most 1048576 bytes/],
    ['65 descriptors', 'POST', '/json', JSON.stringify({ domain: 'd', descriptors: Array.from({ length: 65 }, () => ({ entries: [{ key: 'a', value: 'b' }] })) }), {}, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_CHECK', /^got 65 descriptors; at most 64 are accepted in one request$/],
    ['33 entries', 'POST', '/v1/check', JSON.stringify({ domain: 'd', descriptors: [Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']))] }), {}, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_CHECK', /^descriptors\[0\] has 33 entries; at most 32 are accepted in one descriptor$/],
    ['a block key of 1025 characters', 'POST', '/v1/keys/block', JSON.stringify({ key: 'k'.repeat(1025) }), { authorization: `Bearer ${TOKEN}` }, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_OPTION', /^key must be a non-empty string of at most 1024 characters, got 1025 characters$/],
    ['a check of an unknown shape', 'POST', '/v1/check', '{"domain":"d","descriptors":[],"x":1}', {}, 400, 'bad_request', 'ERR_TOLLGATE_INVALID_CHECK', /unknown field "x"/],
  ] as const)('%s is answered { error, code, message }', async (_name, method, path, body, headers, status, error, code, message) => {
    const response = await fetch(path.startsWith('/v1/keys') ? service.admin(path) : service.url(path), { method, headers, ...(body !== undefined ? { body } : {}) });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const json = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(json).sort()).toEqual(['code', 'error', 'message']);
    expect(json).toMatchObject({ error, code, message: expect.stringMatching(message) });
    if (status === 405) expect(response.headers.get('allow')).toBe('POST');
  });
  it('a request the service refuses never changes a counter: 413, 400 (bad JSON, bad policy, cost, field, check), 404 and 405, then the counters read as fresh', async () => {
    const key = `refused-${Math.random().toString(36).slice(2)}`;
    const policy = { algorithm: 'fixed-window', limit: 5, window: '1h' };
    const limitBody = JSON.stringify({ key, policy });
    const address = `10.77.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
    const checkBody = JSON.stringify({ domain: 'per_ip', descriptors: [{ remote_address: address }] });
    const envoyBody = JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: address }] }] });
    const padded = (body: string) => body + ' '.repeat(2 * MiB); // valid JSON, too large
    const refusals = [
      [413, 'POST', service.url('/v1/limit'), padded(limitBody)],
      [413, 'POST', service.url('/v1/check'), padded(checkBody)],
      [413, 'POST', service.url('/json'), padded(envoyBody)],
      [400, 'POST', service.url('/v1/limit'), limitBody.slice(0, -1)],
      [400, 'POST', service.url('/v1/check'), checkBody.slice(0, -1)],
      [400, 'POST', service.url('/json'), envoyBody.slice(0, -1)],
      [400, 'POST', service.url('/v1/limit'), JSON.stringify({ key, policy: { ...policy, window: '1.5h' } })],
      [400, 'POST', service.url('/v1/limit'), JSON.stringify({ key, policy: { ...policy, softPercent: -1 } })],
      [400, 'POST', service.url('/v1/limit'), JSON.stringify({ key, policy, cost: 1.5 })],
      [400, 'POST', service.url('/v1/limit'), JSON.stringify({ key, policy, costs: 2 })],
      [400, 'POST', service.url('/v1/check'), JSON.stringify({ domain: 'per_ip', descriptors: [{ remote_address: address }], x: 1 })],
      [400, 'POST', service.url('/json'), JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: address }] }], hits_addend: -1 })],
      [404, 'POST', service.url('/v1/limits'), limitBody],
      [404, 'POST', service.url('/json/'), envoyBody],
      [404, 'POST', service.admin('/v1/limit'), limitBody],
      [404, 'POST', service.admin('/v1/check'), checkBody],
      [405, 'PUT', service.url('/v1/limit'), limitBody],
      [405, 'PUT', service.url('/v1/check'), checkBody],
      [405, 'GET', service.url('/json'), undefined],
    ] as const;
    for (const [status, method, url, body] of refusals) {
      const response = await fetch(url, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
      expect(response.status, `${method} ${url} (${body?.length ?? 0} bytes)`).toBe(status);
      await response.body?.cancel();
    }
    // The key's counter, as the admin API reads it (nothing recorded) and as the first real request finds it.
    const inspected = await fetch(service.admin(`/v1/keys?key=${key}&algorithm=fixed-window&limit=5&window=1h`), { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await inspected.json()) as { decision: { remaining: number } }).decision.remaining).toBe(4);
    const first = await fetch(service.url('/v1/limit'), { method: 'POST', body: limitBody });
    expect(((await first.json()) as { remaining: number }).remaining).toBe(4);
    // The rule's counter: the first check counted finds all 100 but its own.
    const checked = await fetch(service.url('/v1/check'), { method: 'POST', body: checkBody });
    expect(((await checked.json()) as { statuses: { limitRemaining: number }[] }).statuses[0]!.limitRemaining).toBe(99);
  });

  it('routes by the normalised path, whatever the query: /json?trace=1, /v1/../json and /./json are /json; /json/ is not', async () => {
    const post = (path: string) =>
      new Promise<number | undefined>((resolve, reject) => {
        const body = JSON.stringify({ domain: 'per_ip', descriptors: [{ entries: [{ key: 'remote_address', value: '10.9.9.9' }] }] });
        const req = httpRequest({ host: '127.0.0.1', port: service.httpPort, path, method: 'POST', headers: { 'content-type': 'application/json' } }, (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode));
        });
        req.on('error', reject);
        req.end(body);
      });
    for (const path of ['/json?trace=1', '/v1/../json', '/./json', '/json']) expect(await post(path), path).toBe(200);
    expect(await post('/json/')).toBe(404);
  });

  it('refuses a block past the 10,000th, saying how many are blocked', async () => {
    const block = (key: string) => JSON.stringify({ key, ttlMs: 60_000 });
    // 10,000 requests pipelined on one connection: quicker than 10,000 round trips.
    const answers = await pipeline(
      service.adminPort,
      Array.from({ length: 10_000 }, (_, i) => ({ method: 'POST', path: '/v1/keys/block', headers: { authorization: `Bearer ${TOKEN}` }, body: block(`full-${i}`) })),
    );
    expect(answers.filter((answer) => answer === 200)).toHaveLength(10_000);
    const refused = await fetch(service.admin('/v1/keys/block'), { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: block('one-more') });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: 'bad_request',
      code: 'ERR_TOLLGATE_INVALID_OPTION',
      message: '10000 keys are blocked already, at most 10000 at once; unblock some or wait for blocks to expire',
    });
  });
});

describe('tollgate serve without --config or --admin-token', () => {
  const running = serviceForSuite([]);
  let service: ServiceProcess;
  beforeAll(() => void (service = running()));

  it('warns at start that nothing is limited, and /readyz says so while staying ready', async () => {
    const warning = service.logs.find((line) => line.level === 40 && /nothing is limited/.test(String(line.msg)));
    expect(warning?.msg).toMatch(/no --config/);
    const ready = await fetch(service.url('/readyz'));
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', rules: 'none loaded: nothing is limited', domains: [] });
    const check = await fetch(service.url('/json'), { method: 'POST', body: JSON.stringify({ domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] }) });
    expect(await check.json()).toEqual({ overallCode: 'OK', statuses: [{ code: 'OK' }] });
  });

  it('admin endpoints are refused with 403 and a code', async () => {
    const response = await fetch(service.admin('/v1/keys/blocked'));
    expect(response.status).toBe(403);
    expect(await response.json()).toEqual({ error: 'forbidden', code: 'ERR_TOLLGATE_ADMIN_DISABLED', message: expect.stringMatching(/--admin-token/) });
  });
});
