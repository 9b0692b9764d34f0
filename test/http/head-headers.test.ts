/**
 * An admitted request's rate-limit headers go out with the response's head (src/http/head-headers.ts)
 * on node:http and Hono on @hono/node-server: the head on the wire, read raw from the socket, is the
 * one node sends when the same headers are set with `setHeader` before the app runs (the way they
 * were sent before), byte for byte but the Date line, for every way an app writes its head.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Hono } from 'hono';
import { serve } from '@hono/node-server';
import { afterEach, describe, expect, it } from 'vitest';
import { rateLimit } from '../../src/http/index.js';
import { rateLimiter } from '../../src/http/hono.js';

const NOW = Date.UTC(2026, 10, 29, 12, 0, 0);
const options = { policy: { algorithm: 'fixed-window' as const, limit: 5, window: '1h' }, clock: () => NOW };
/** The headers Tollgate sends on the first request of `options`, as report.ts builds them. */
const ADMITTED: [string, string][] = [
  ['x-ratelimit-limit', '5'],
  ['x-ratelimit-remaining', '4'],
  ['x-ratelimit-reset', String(Math.ceil((NOW + 3_600_000 - (NOW % 3_600_000)) / 1000))],
];

type App = (req: IncomingMessage, res: ServerResponse) => void;

/** The ways an app writes its head. */
const APPS: Record<string, App> = {
  'writeHead(status, headers)': (_req, res) => void res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok'),
  'writeHead(status, reason, headers)': (_req, res) => void res.writeHead(201, 'Made', { 'Content-Type': 'text/plain' }).end('ok'),
  'writeHead(status, [flat array])': (_req, res) => void res.writeHead(200, ['content-type', 'text/plain', 'x-extra', 'a']).end('ok'),
  'end() alone': (_req, res) => void res.end('ok'),
  'writeHead(status) alone': (_req, res) => void res.writeHead(204).end(),
  'setHeader, then end() (Express-like)': (_req, res) => {
    res.setHeader('Content-Type', 'text/plain');
    res.end('ok');
  },
  'one of our names in its writeHead, another case': (_req, res) => void res.writeHead(200, { 'X-RateLimit-Limit': 'mine', 'content-type': 'text/plain' }).end('ok'),
  'one of our names by setHeader first': (_req, res) => {
    res.setHeader('x-ratelimit-remaining', 'mine');
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  },
  'an empty header name in its writeHead': (_req, res) => void res.writeHead(200, { '': 'ignored', 'content-type': 'text/plain' }).end('ok'),
};

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** The response head as sent, its Date line left out (the second it was sent in). */
function rawHead(port: number, path = '/hello'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      resolve(text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n').filter((line) => !line.startsWith('Date: ')).join('\r\n'));
    });
  });
}

/** The reference: the same headers set with setHeader before the app, as the middleware did before. */
function setFirst(app: App): App {
  return (req, res) => {
    for (const [name, value] of ADMITTED) res.setHeader(name, value);
    app(req, res);
  };
}

describe('rate-limit headers sent with the head, node:http', () => {
  it.each(Object.keys(APPS))('%s: the same head as with setHeader first', async (name) => {
    const app = APPS[name]!;
    const middleware = rateLimit(options);
    const tollgate = await listen(createServer((req, res) => middleware(req, res, () => app(req, res))));
    const reference = await listen(createServer(setFirst(app)));
    const [ours, theirs] = [await rawHead(tollgate), await rawHead(reference)];
    expect(ours).toContain('x-ratelimit-remaining: ');
    if (name.includes('setHeader')) {
      // The app's setHeader came first: its headers lead, ours follow (field order across names carries no meaning, RFC 9110 §5.3).
      expect(ours.split('\r\n').sort()).toEqual(theirs.split('\r\n').sort());
    } else {
      expect(ours).toBe(theirs);
    }
    await middleware.close();
  });

  it('also through handle(), and on a response whose head the app had already sent', async () => {
    const middleware = rateLimit(options);
    const port = await listen(
      createServer(async (req, res) => {
        if (await middleware.handle(req, res)) APPS['writeHead(status, headers)']!(req, res);
      }),
    );
    const reference = await listen(createServer(setFirst(APPS['writeHead(status, headers)']!)));
    expect(await rawHead(port)).toBe(await rawHead(reference));
    // A head sent before the middleware ran: nothing is added, nothing throws.
    const early = rateLimit(options);
    const sent = await listen(
      createServer((req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain' });
        early(req, res, () => res.end('ok'));
      }),
    );
    expect(await rawHead(sent)).not.toContain('x-ratelimit');
    await Promise.all([middleware.close(), early.close()]);
  });
});

describe('rate-limit headers sent with the head, Hono on @hono/node-server', () => {
  it.each([
    ['c.text()', (app: Hono) => app.get('/hello', (c) => c.text('ok'))],
    ['a Response of its own', (app: Hono) => app.get('/hello', () => new Response('ok', { headers: { 'x-own': '1' } }))],
  ] as const)('%s: the same head as with setHeader on node first', async (_name, route) => {
    const serveHono = async (app: Hono, before?: (res: ServerResponse) => void): Promise<number> => {
      route(app);
      const server = await new Promise<Server>((resolve) => {
        const started = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1', createServer: (serverOptions: object, handler: (req: IncomingMessage, res: ServerResponse) => void) => createServer(serverOptions, (req, res) => (before?.(res), handler(req, res))) } as never, () => resolve(started as Server));
      });
      servers.push(server);
      return (server.address() as AddressInfo).port;
    };
    const limited = new Hono();
    const middleware = rateLimiter(options);
    limited.use('*', middleware);
    const ours = await rawHead(await serveHono(limited));
    const theirs = await rawHead(await serveHono(new Hono(), (res) => ADMITTED.forEach(([name, value]) => res.setHeader(name, value))));
    expect(ours).toContain('x-ratelimit-limit: 5');
    expect(ours).toBe(theirs);
    await middleware.limiter.close();
  });
});
