// The floor under `tollgate gateway`: a bare reverse proxy in Node (a node:http server in front,
// one of three HTTP clients behind), no routes, no decision, no header filtering. What bench/gateway.js
// `--floors` sets beside the gateway and nginx, to tell Node's own HTTP cost from Tollgate's.
//
//   node bench/gateway-floor-server.js VARIANT PORT UPSTREAM_PORT
//
//   undici-dispatch   undici Pool.dispatch with a handler object (what src/gateway/proxy.ts does)
//   undici-request    undici Pool.request (a promise and a body stream per request)
//   http-agent        node:http request() on a keep-alive Agent (Node's native llhttp parser)
//
// A variant may end in `/pN` (undici pipelining N, default 1) and `/cN` (at most N upstream
// connections, default 256): `undici-dispatch/p10/c16`.
//
// Each answers the client with the upstream's status, raw headers and body (one `end` when the
// body came in one read). Prints "ready <port>" once listening; SIGTERM stops it.
import { Agent, createServer, request as httpRequest } from 'node:http';
import { Pool } from 'undici';

const [spec, portArg, upstreamPortArg] = process.argv.slice(2);
const [variant, ...tuning] = spec.split('/');
const upstreamPort = Number(upstreamPortArg);
const origin = `http://127.0.0.1:${upstreamPort}`;
const tuned = (letter, fallback) => Number(tuning.find((part) => part.startsWith(letter))?.slice(1) ?? fallback);
const CONNECTIONS = tuned('c', 256);
const PIPELINING = tuned('p', 1);

/** The client's request headers as a flat array, for the upstream (no filtering: a floor). */
function flatHeaders(req) {
  return req.rawHeaders;
}

/** undici's raw response headers (Buffers) as latin1 strings, for writeHead. */
function stringHeaders(raw) {
  const out = new Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw[i].toString('latin1');
  return out;
}

let handle;
if (variant === 'undici-dispatch') {
  const pool = new Pool(origin, { connections: CONNECTIONS, pipelining: PIPELINING, keepAliveTimeout: 4_000 });
  class Relay {
    constructor(res) {
      this.res = res;
      this.held = undefined;
    }
    onConnect() {}
    onHeaders(status, raw) {
      this.res.writeHead(status, stringHeaders(raw));
      return true;
    }
    onData(chunk) {
      if (this.held === undefined) this.held = chunk;
      else this.held = Buffer.concat([this.held, chunk]);
      return true;
    }
    onComplete() {
      this.res.end(this.held);
    }
    onError() {
      if (!this.res.headersSent) this.res.writeHead(502);
      this.res.end();
    }
  }
  handle = (req, res) => pool.dispatch({ method: req.method, path: req.url, headers: flatHeaders(req), body: null }, new Relay(res));
} else if (variant === 'undici-request') {
  const pool = new Pool(origin, { connections: CONNECTIONS, pipelining: PIPELINING, keepAliveTimeout: 4_000 });
  handle = async (req, res) => {
    try {
      const answer = await pool.request({ method: req.method, path: req.url, headers: flatHeaders(req) });
      const body = Buffer.from(await answer.body.arrayBuffer());
      const headers = [];
      for (const [name, value] of Object.entries(answer.headers)) headers.push(name, value);
      res.writeHead(answer.statusCode, headers);
      res.end(body);
    } catch {
      res.writeHead(502);
      res.end();
    }
  };
} else if (variant === 'http-agent') {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS, keepAliveMsecs: 4_000 });
  handle = (req, res) => {
    const upstream = httpRequest({ host: '127.0.0.1', port: upstreamPort, method: req.method, path: req.url, headers: flatHeaders(req), agent });
    upstream.on('response', (answer) => {
      const chunks = [];
      answer.on('data', (chunk) => chunks.push(chunk));
      answer.on('end', () => {
        res.writeHead(answer.statusCode, answer.rawHeaders);
        res.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
      });
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    upstream.end();
  };
} else {
  console.error(`unknown variant ${variant}: undici-dispatch | undici-request | http-agent`);
  process.exit(2);
}

const server = createServer({ keepAliveTimeout: 65_000 }, handle);
server.listen(Number(portArg), '127.0.0.1', () => console.log(`ready ${server.address().port}`));
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
