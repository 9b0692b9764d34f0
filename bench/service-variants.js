// Servers between node:http hello world and `tollgate serve`, for bench/service.js: they split the
// decision service's cost per request into the response it sends, the decision itself, and the
// service around it. Each runs in its own process (started and killed by PID by the benchmark):
//
//   node bench/service-variants.js same-response PORT [SPIN_US]
//       node:http that reads and JSON.parses the body, then answers the exact headers and body
//       Tollgate sends for an admitted /json request: no decision. SPIN_US: busy-wait that many µs
//       per request first (a stand-in for work, to see how the kernel's cost per response changes
//       when the server answers more slowly)
//   node bench/service-variants.js bare-check PORT DIST_DIR RULES_DIR
//       the same handler around Tollgate's decision: fromEnvoyRequest → limiter.check() (memory
//       store, the rules) → toEnvoyResponse + rate-limit headers; no routes, metrics, dashboard
//   node bench/service-variants.js same-bytes PORT ANSWER_FILE
//       node:http that reads and JSON.parses the body, then answers the status, headers and body
//       recorded in ANSWER_FILE ({ status, headers, body }: what a Tollgate server answered one
//       request, bench/service-floor.js): the floor under Tollgate's /json, byte for byte
//   node bench/service-variants.js uws-same-bytes PORT ANSWER_FILE UWS_MODULE
//       the same answer from uWebSockets.js (UWS_MODULE: the path of an installed build, e.g. the
//       uws-pack package unpacked somewhere outside the project; Tollgate does not depend on it):
//       what the HTTP layer costs below node:http
//   node bench/service-variants.js serve-no-listeners PORT DIST_DIR RULES_DIR
//       the real service (startService, as `tollgate serve --config RULES --log-level silent`),
//       with the 'check' event listeners (metrics, dashboard) removed after start
//
// Prints "ready <port>" on stdout once listening.
import { createServer } from 'node:http';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [mode, portArg, distDir, rulesDir] = process.argv.slice(2);
const port = Number(portArg);
const load = (path) => import(pathToFileURL(join(distDir, path)).href);

function readJsonBody(request, then) {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let json;
    try {
      json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      json = null;
    }
    then(json);
  });
}

if (mode === 'same-response') {
  const body = '{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":100,"unit":"MINUTE"},"limitRemaining":99,"durationUntilReset":"49s"}]}';
  const headers = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-ratelimit-limit': '100',
    'x-ratelimit-remaining': '99',
    'x-ratelimit-reset': '1795312561',
    'ratelimit-policy': '100;w=60',
    ratelimit: 'limit=100, remaining=99, reset=49',
  };
  const spinUs = Number(distDir); // bench/service.js passes its dist dir here: no spin
  const spinNs = BigInt(Number.isFinite(spinUs) ? Math.round(spinUs * 1000) : 0);
  const server = createServer((request, response) =>
    readJsonBody(request, () => {
      const started = process.hrtime.bigint();
      while (spinNs > 0n && process.hrtime.bigint() - started < spinNs);
      response.writeHead(200, headers);
      response.end(body);
    }),
  );
  server.listen(port, '127.0.0.1', () => console.log(`ready ${server.address().port}`));
} else if (mode === 'same-bytes') {
  const { readFileSync } = await import('node:fs');
  const answer = JSON.parse(readFileSync(distDir, 'utf8'));
  const body = Buffer.from(answer.body);
  const headers = { ...answer.headers, 'content-length': body.length };
  const server = createServer((request, response) =>
    readJsonBody(request, () => {
      response.writeHead(answer.status, headers);
      response.end(body);
    }),
  );
  server.listen(port, '127.0.0.1', () => console.log(`ready ${server.address().port}`));
} else if (mode === 'uws-same-bytes') {
  const { readFileSync } = await import('node:fs');
  const { App, us_socket_local_port: localPort } = await import(pathToFileURL(rulesDir).href);
  const answer = JSON.parse(readFileSync(distDir, 'utf8'));
  const status = `${answer.status} ${answer.status === 200 ? 'OK' : 'Too Many Requests'}`;
  const headers = Object.entries(answer.headers).filter(([name]) => name !== 'content-length');
  App()
    .post('/*', (response) => {
      let chunks = '';
      response.onAborted(() => {});
      response.onData((chunk, last) => {
        chunks += Buffer.from(chunk).toString('utf8');
        if (!last) return;
        JSON.parse(chunks);
        response.cork(() => {
          response.writeStatus(status);
          for (const [name, value] of headers) response.writeHeader(name, value);
          response.end(answer.body);
        });
      });
    })
    .listen('127.0.0.1', port, (listening) => console.log(listening ? `ready ${localPort(listening)}` : 'cannot listen'));
} else if (mode === 'bare-check') {
  const { createLimiter, memoryStore, loadRules } = await load('index.js');
  const { RulesHolder } = await load('rules/index.js');
  const { fromEnvoyRequest, toEnvoyResponse } = await load('service/check/envoy.js');
  const { checkHeaders } = await load('http/headers.js');
  const limiter = createLimiter({ store: memoryStore(), rules: new RulesHolder(await loadRules(rulesDir)) });
  const server = createServer((request, response) =>
    readJsonBody(request, async (json) => {
      let result;
      try {
        result = await limiter.check(fromEnvoyRequest(json));
      } catch (error) {
        response.writeHead(400, { 'content-type': 'text/plain' });
        response.end(String(error.message));
        return;
      }
      const text = JSON.stringify(toEnvoyResponse(result));
      response.writeHead(result.overallCode === 'OK' ? 200 : 429, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': Buffer.byteLength(text),
        ...checkHeaders(result, Date.now()),
      });
      response.end(text);
    }),
  );
  server.listen(port, '127.0.0.1', () => console.log(`ready ${server.address().port}`));
} else if (mode === 'serve-no-listeners') {
  const { startService, createLogger } = await load('service/server.js');
  const { resolveServiceOptions } = await load('service/options.js');
  const options = resolveServiceOptions({ config: rulesDir, port: String(port), 'grpc-port': '0', 'admin-port': '0', host: '127.0.0.1', 'log-level': 'silent' }, {});
  const service = await startService(options, createLogger('silent'));
  const removed = service.context.events.listenerCount('check');
  service.context.events.removeAllListeners('check');
  console.log(`ready ${service.httpPort} (removed ${removed} check listeners)`);
} else {
  console.error('usage: node bench/service-variants.js same-response PORT [SPIN_US] | same-bytes PORT ANSWER_FILE | uws-same-bytes PORT ANSWER_FILE UWS_MODULE | bare-check PORT DIST RULES | serve-no-listeners PORT DIST RULES');
  process.exit(2);
}
process.on('SIGTERM', () => process.exit(0));
