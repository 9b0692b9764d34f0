// An app whose rate limiter is traced: Tollgate's middleware on node:http, each request in a span of
// the app's own (what @opentelemetry/instrumentation-http would make), so the decision's
// tollgate.decide span is its child. Run with the SDK preloaded:
//
//   node --import ./examples/tracing/otel.mjs examples/tracing/app.mjs
//
// It sends three requests to itself (the third is refused: 2 a minute) and prints their statuses;
// the spans come out on stderr.
import { createServer } from 'node:http';
import { trace } from '@opentelemetry/api';
import { rateLimit } from 'tollgate/http';

const tracer = trace.getTracer('example-app');
const limiter = rateLimit({ policy: { algorithm: 'fixed-window', limit: 2, window: '1m' } });
const server = createServer((req, res) =>
  tracer.startActiveSpan(`${req.method} ${req.url}`, async (span) => {
    if (await limiter.handle(req, res)) res.end('ok\n');
    span.setAttribute('http.response.status_code', res.statusCode);
    span.end();
  }),
);
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const statuses = [];
for (let i = 0; i < 3; i++) statuses.push((await fetch(`http://127.0.0.1:${server.address().port}/hello`)).status);
console.log(statuses.join(' '));
server.close();
