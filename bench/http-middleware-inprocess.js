// Tollgate's node middleware (`rateLimit()`, the one node:http, Express and Connect use) in one
// process, no sockets: what its JavaScript costs per request, two builds side by side.
//
//   node bench/http-middleware-inprocess.js DIST_A DIST_B [--express] [--head] [--requests 20000] [--rounds 21]
//
// --head: once passed on, each request is answered as bench/http-middleware-server.js's node app
// answers (writeHead(200, { content-type, content-length }), then the body; nothing reaches a
// socket): the rate-limit headers' cost in node's head is then counted too.
//
// Each round builds fresh IncomingMessage / ServerResponse pairs (untimed; with --express they get
// an Express app's request and response prototypes, as Express gives every request), then times (CPU
// time of the process, process.cpuUsage) `middleware(req, res, next)` over them, one request per microtask checkpoint (as served requests
// are: the memory store's shared clock reading expires between them). A and B alternate which goes
// first; the first 2 rounds are warm-up. Prints the median ns per request of each, and the median
// and range of the per-round ratio B ÷ A. The memory store, a fixed window of 1 hour, every request
// admitted: the same limiter as bench/http-middleware.js's admitted subjects.
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(argv[index + 1]);
};
const dists = argv.filter((arg, i) => !arg.startsWith('--') && (i === 0 || !argv[i - 1].startsWith('--') || argv[i - 1] === '--express' || argv[i - 1] === '--head'));
if (dists.length !== 2) {
  console.error('usage: node bench/http-middleware-inprocess.js DIST_A DIST_B [--express] [--requests N] [--rounds N]');
  process.exit(2);
}
const EXPRESS = argv.includes('--express');
const HEAD = argv.includes('--head');
const BODY = 'hello world';
const REQUESTS = option('requests', 20_000);
const ROUNDS = option('rounds', 21);
const WARMUP_ROUNDS = 2;

const policy = { algorithm: 'fixed-window', limit: 1_000_000_000, window: '1h' };
const load = (dist) => import(pathToFileURL(resolve(dist, 'http/index.js')).href);
const middlewares = [(await load(dists[0])).rateLimit({ policy }), (await load(dists[1])).rateLimit({ policy })];
const app = EXPRESS ? (await import('express')).default() : undefined;

const socket = new Socket();
Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' });
let passed = 0;
const next = () => {
  passed += 1;
};

function answer(res) {
  next();
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': BODY.length }).end(BODY);
}

function exchanges() {
  const pairs = new Array(REQUESTS);
  for (let i = 0; i < REQUESTS; i++) {
    const req = new IncomingMessage(socket);
    req.method = 'GET';
    req.url = '/hello';
    req.headers = { host: '127.0.0.1', accept: '*/*' };
    const res = new ServerResponse(req);
    if (HEAD) {
      // The head and body are built, then dropped.
      res._send = () => true;
      res._writeRaw = () => true;
    }
    if (app !== undefined) {
      // What Express does to every request it handles.
      Object.setPrototypeOf(req, app.request);
      Object.setPrototypeOf(res, app.response);
      req.res = res;
      res.req = req;
      res.locals = Object.create(null);
    }
    pairs[i] = [req, res];
  }
  return pairs;
}

async function round(middleware) {
  const pairs = exchanges();
  // CPU time, not wall time: on a shared machine other processes' turns are not this code's cost.
  const start = process.cpuUsage();
  for (const [req, res] of pairs) {
    middleware(req, res, HEAD ? () => answer(res) : next);
    await undefined;
  }
  const cpu = process.cpuUsage(start);
  return ((cpu.user + cpu.system) * 1000) / REQUESTS;
}

const a = [];
const b = [];
const ratios = [];
for (let r = 0; r < ROUNDS + WARMUP_ROUNDS; r++) {
  const aFirst = r % 2 === 0;
  const first = await round(middlewares[aFirst ? 0 : 1]);
  const second = await round(middlewares[aFirst ? 1 : 0]);
  if (r < WARMUP_ROUNDS) continue;
  const [ta, tb] = aFirst ? [first, second] : [second, first];
  a.push(ta);
  b.push(tb);
  ratios.push(tb / ta);
}
const median = (values) => [...values].sort((x, y) => x - y)[values.length >> 1];
if (passed !== 2 * (ROUNDS + WARMUP_ROUNDS) * REQUESTS) throw new Error(`only ${passed} requests were passed on`);
console.log(
  `${EXPRESS ? 'Express prototypes' : 'node:http'}${HEAD ? ', with the head and body' : ''}: A ${median(a).toFixed(0)} ns/request, B ${median(b).toFixed(0)} ns/request; ` +
    `B ÷ A ${median(ratios).toFixed(3)} [${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}] over ${ROUNDS} rounds of ${REQUESTS}`,
);
