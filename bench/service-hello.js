// Baseline servers for bench/service.js (each runs in its own process, started and killed by PID
// by the benchmark):
//
//   node bench/service-hello.js http PORT             plain node:http "hello world" (any method, any
//                                                     path; a request body is left to Node to discard)
//   node bench/service-hello.js grpc PORT PROTO_DIR   @grpc/grpc-js server whose ShouldRateLimit
//                                                     answers a constant OK (no limiter): what gRPC
//                                                     itself costs in Node
//   node bench/service-hello.js h2 PORT PROTO_DIR     node:http2 answering every POST with the same
//                                                     pre-encoded gRPC reply and grpc-status 0
//                                                     trailers (no gRPC library): what HTTP/2 costs
//   node bench/service-hello.js h2-floor PORT PROTO_DIR
//                                                     the same, with Tollgate's own response headers
//                                                     and trailers (dist/service/grpc/framing.js),
//                                                     all precomputed: the floor under a ShouldRateLimit
//                                                     answer on node:http2 (its stream, headers,
//                                                     data and trailers, nothing else)
//
// Prints "ready <port>" on stdout once listening.
import { createServer } from 'node:http';

const [mode, portArg, protoDir] = process.argv.slice(2);
const port = Number(portArg);

if (mode === 'http') {
  const body = 'hello world\n';
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
    response.end(body);
  });
  server.listen(port, '127.0.0.1', () => console.log(`ready ${server.address().port}`));
  process.on('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
} else if (mode === 'grpc') {
  const grpc = await import('@grpc/grpc-js');
  const { loadSync } = await import('@grpc/proto-loader');
  const { LOADER_OPTIONS } = await import('../dist/service/grpc/messages.js');
  const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto'], { ...LOADER_OPTIONS, includeDirs: [protoDir] });
  // The same shape Tollgate answers with for one matched limit (headers included).
  const reply = {
    overall_code: 'OK',
    statuses: [{ code: 'OK', current_limit: { requests_per_unit: 100, unit: 'MINUTE' }, limit_remaining: 99, duration_until_reset: { seconds: 60, nanos: 0 } }],
    response_headers_to_add: [
      { key: 'RateLimit-Limit', value: '100' },
      { key: 'RateLimit-Remaining', value: '99' },
      { key: 'RateLimit-Reset', value: '60' },
    ],
  };
  const server = new grpc.Server();
  server.addService(definition['envoy.service.ratelimit.v3.RateLimitService'], {
    ShouldRateLimit: (call, callback) => {
      if (call.request.domain === '') callback({ code: grpc.status.INVALID_ARGUMENT, details: 'domain' });
      else callback(null, reply);
    },
  });
  server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (error, bound) => {
    if (error) throw error;
    console.log(`ready ${bound}`);
  });
  process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
} else if (mode === 'h2' || mode === 'h2-floor') {
  const { createServer: createH2Server } = await import('node:http2');
  const { loadSync } = await import('@grpc/proto-loader');
  const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto'], { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true, oneofs: true, includeDirs: [protoDir] });
  const method = definition['envoy.service.ratelimit.v3.RateLimitService'].ShouldRateLimit;
  const message = method.responseSerialize({
    overall_code: 'OK',
    statuses: [{ code: 'OK', current_limit: { requests_per_unit: 100, unit: 'MINUTE' }, limit_remaining: 99, duration_until_reset: { seconds: 60, nanos: 0 } }],
  });
  // gRPC framing: a compressed flag (0) and the message length, big-endian.
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), message]);
  frame.writeUInt32BE(message.length, 1);
  const server = createH2Server();
  if (mode === 'h2-floor') {
    const { OK_TRAILERS, RESPONSE_HEADERS } = await import('../dist/service/grpc/framing.js');
    const sendTrailers = function () {
      this.sendTrailers(OK_TRAILERS);
    };
    const ignore = () => {};
    server.on('stream', (stream) => {
      stream.on('error', ignore);
      stream.on('data', ignore);
      stream.on('end', () => {
        stream.respond(RESPONSE_HEADERS, { waitForTrailers: true });
        stream.on('wantTrailers', sendTrailers);
        stream.end(frame);
      });
    });
  } else server.on('stream', (stream) => {
    stream.on('data', () => {});
    stream.on('end', () => {
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(frame);
    });
  });
  server.listen(port, '127.0.0.1', () => console.log(`ready ${server.address().port}`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
} else {
  console.error('usage: node bench/service-hello.js http PORT | grpc PORT PROTO_DIR | h2 PORT PROTO_DIR | h2-floor PORT PROTO_DIR');
  process.exit(2);
}
