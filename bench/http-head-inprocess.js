// What node:http charges for an admitted request's three rate-limit headers, in process, no sockets:
// the app writes its head with writeHead(200, { content-type, content-length }) and the body, and the
// headers come (a) from setHeader before it (what the middleware did before), (b) through
// sendWithHead (src/http/head-headers.ts: in the app's writeHead call), or (c) not at all (bare).
// CPU time per response, median of the rounds after 5 of warm-up, each round on fresh responses.
//
//   node bench/http-head-inprocess.js [DIST] [--rounds 31] [--responses 20000]
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const argv = process.argv.slice(2);
const option = (name, fallback) => {
  const index = argv.indexOf(`--${name}`);
  return index === -1 ? fallback : Number(argv[index + 1]);
};
const dist = argv.find((arg, i) => !arg.startsWith('--') && (i === 0 || !argv[i - 1].startsWith('--'))) ?? 'dist';
const ROUNDS = option('rounds', 31);
const RESPONSES = option('responses', 20_000);
const WARMUP_ROUNDS = 5;
const { sendWithHead } = await import(pathToFileURL(resolve(dist, 'http/head-headers.js')).href);

const socket = new Socket();
const HEADERS = [
  ['x-ratelimit-limit', '1000000000'],
  ['x-ratelimit-remaining', '999999998'],
  ['x-ratelimit-reset', String(Math.ceil(Date.now() / 3_600_000) * 3600)],
];
const BODY = 'hello world';
const app = (res) => res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': BODY.length }).end(BODY);
const subjects = {
  bare: (res) => app(res),
  'setHeader first': (res) => {
    for (let i = 0; i < HEADERS.length; i++) res.setHeader(HEADERS[i][0], HEADERS[i][1]);
    app(res);
  },
  sendWithHead: (res) => {
    sendWithHead(res, HEADERS);
    app(res);
  },
};

function response() {
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  const res = new ServerResponse(req);
  // Nothing reaches a socket: the head and body are built, then dropped.
  res._send = () => true;
  res._writeRaw = () => true;
  return res;
}

const samples = {};
for (let round = 0; round < ROUNDS; round++) {
  const names = Object.keys(subjects);
  for (const name of round % 2 === 0 ? names : names.reverse()) {
    const responses = Array.from({ length: RESPONSES }, response);
    const run = subjects[name];
    const start = process.cpuUsage();
    for (let i = 0; i < RESPONSES; i++) run(responses[i]);
    const cpu = process.cpuUsage(start);
    if (round >= WARMUP_ROUNDS) (samples[name] ??= []).push(((cpu.user + cpu.system) * 1000) / RESPONSES);
  }
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const bare = samples.bare;
for (const [name, values] of Object.entries(samples)) {
  const over = values.map((v, i) => v - bare[i]);
  console.log(`${name.padEnd(16)} ${median(values).toFixed(0)} ns per response; over bare ${name === 'bare' ? '-' : `${median(over).toFixed(0)} ns`}`);
}
