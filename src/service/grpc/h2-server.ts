/**
 * The gRPC listener on node:http2 (`--grpc-server http2`, the default): envoy's
 * RateLimitService/ShouldRateLimit and grpc.health.v1 Check/Watch, the gRPC protocol done by hand
 * (framing.ts) with protobufjs codecs (codec.ts). It answers what the grpc-js server
 * answers, byte for byte (test/service/grpc/wire.test.ts), for about half the CPU per call
 * (BENCHMARKS.md, "Decision service over gRPC"): grpc-js's call machinery was the ceiling.
 *
 * Per stream: `content-type: application/grpc*` or HTTP 415 (as grpc-js); a known method or
 * UNIMPLEMENTED; `grpc-timeout` (DEADLINE_EXCEEDED when it passes); exactly one request message
 * (UNIMPLEMENTED for none or two, as grpc-js), at most 1 MiB (RESOURCE_EXHAUSTED), decompressed if
 * flagged (identity, deflate, gzip); then the answer, or a trailers-only error. Nothing a client
 * sends (garbage, a truncated frame, a reset) can throw out of a handler.
 */
import { constants as h2, createSecureServer, createServer, type Http2SecureServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Session, type ServerHttp2Stream } from 'node:http2';
import type { ServiceContext } from '../context.js';
import { DEGRADED_HEADER } from '../check/decide.js';
import { loadGrpcCodecs, type GrpcCodecs } from './codec.js';
import { FramingError, MessageReader, OK_TRAILERS, RESPONSE_HEADERS, decompress, failureHeaders, failureTrailers, frame, parseTimeout, type RawMessage } from './framing.js';
import { HealthWatchers, type HealthStream } from './health.js';
import { hygieneSettings, keepConnectionsClean } from './connection-hygiene.js';
import { requireClientName, secureContextOptions, type TlsReloader } from '../http/tls.js';
import { GRPC_STATUS, HEALTH_SERVICE, MAX_MESSAGE_BYTES, RATE_LIMIT_SERVICE, SHUTDOWN_GRACE_MS, answerShouldRateLimit, shutDownWithin, type GrpcFailure, type GrpcServer, type ShouldRateLimitAnswer } from './messages.js';

const SHOULD_RATE_LIMIT_PATH = `/${RATE_LIMIT_SERVICE}/ShouldRateLimit`;
const HEALTH_CHECK_PATH = `/${HEALTH_SERVICE}/Check`;
const HEALTH_WATCH_PATH = `/${HEALTH_SERVICE}/Watch`;

/**
 * The HTTP/2 server: plain (h2c, as Envoy's `http2_protocol_options` cluster speaks by default), or
 * over TLS with ALPN `h2` only (no HTTP/1.1 fallback: gRPC needs HTTP/2), mutual with
 * --tls-client-ca, its certificate kept current by `tls`.
 */
function h2Server(ctx: ServiceContext, tls: TlsReloader | undefined): Http2Server | Http2SecureServer {
  // As grpc-js: no limit on header blocks sent; Node's 10 MB per connection raised to 64 MB, so
  // many calls of up to 1 MiB in flight on one connection are not refused (still a bound).
  const options = { maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER, maxSessionMemory: 64, settings: hygieneSettings(ctx.options.grpcConnections) };
  if (tls === undefined) return createServer(options);
  const server = createSecureServer({ ...options, ...secureContextOptions(tls.material, true), allowHTTP1: false, handshakeTimeout: ctx.options.connections.headersTimeoutMs });
  tls.subscribe((material) => server.setSecureContext(secureContextOptions(material, true)));
  requireClientName(server, tls.files, ctx.logger);
  return server;
}

/** Starts the node:http2 gRPC listener on `host:port` (0: a free port), over TLS with `tls`; resolves once it is bound. */
export async function startGrpcH2Server(ctx: ServiceContext, host: string, port: number, tls?: TlsReloader): Promise<GrpcServer> {
  const codecs = loadGrpcCodecs();
  const server = h2Server(ctx, tls);
  const sessions = new Set<ServerHttp2Session>();
  let closing: Promise<void> | undefined;
  const health = new HealthWatchers(ctx, () => closing !== undefined);
  keepConnectionsClean(server, ctx.options.grpcConnections, ctx.options.connections.headersTimeoutMs);

  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    // A broken connection ends its session; there is nothing to answer.
    session.on('error', () => {});
  });
  server.on('stream', (stream, headers) => {
    try {
      onStream(ctx, codecs, health, stream, headers);
    } catch (error) {
      // A bug or a stream closed under us: this call ends, the process goes on.
      ctx.logger.error({ err: error }, 'gRPC stream failed');
      stream.destroy();
    }
  });

  const boundPort = await new Promise<number>((resolve, reject) => {
    server.once('error', (error) => reject(new Error(`gRPC cannot listen on ${host}:${port}: ${error.message}`)));
    server.listen(port, host, () => {
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : port);
    });
  });

  // Past the bind, a listener error (e.g. out of file descriptors on accept) is logged, never thrown.
  server.on('error', (error) => ctx.logger.error({ err: error }, 'gRPC listener error'));

  return {
    port: boundPort,
    close: (graceMs = SHUTDOWN_GRACE_MS) => {
      if (closing === undefined) health.close();
      closing ??= shutDownWithin(
        ctx,
        graceMs,
        (done) => {
          server.close(() => done());
          // GOAWAY: no new calls, those in flight finish, then each connection closes.
          for (const session of sessions) session.close();
        },
        () => {
          for (const session of sessions) session.destroy();
        },
      );
      return closing;
    },
  };
}

/** The listener of what nothing is to be done about (a reset or broken stream's error). */
function ignore(): void {}

function onStream(ctx: ServiceContext, codecs: GrpcCodecs, health: HealthWatchers, stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
  // A reset or broken stream: nothing to answer, and nothing may throw.
  stream.on('error', ignore);
  const contentType = headers['content-type'];
  if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
    stream.respond({ ':status': 415 }, { endStream: true });
    return;
  }
  const path = headers[':path'];
  if (path === SHOULD_RATE_LIMIT_PATH) {
    const call = new ServerCall(stream, headers, path, ctx.options.grpcConnections.receiveTimeoutMs);
    call.readRequest((bytes) => guarded(ctx, call, () => shouldRateLimit(ctx, codecs, call, bytes)));
  } else if (path === HEALTH_CHECK_PATH) {
    const call = new ServerCall(stream, headers, path, ctx.options.grpcConnections.receiveTimeoutMs);
    call.readRequest((bytes) =>
      guarded(ctx, call, () => {
        const request = call.decode(codecs.health, bytes);
        if (request === undefined) return undefined;
        return health.check(request.service).then((answer) => ('failure' in answer ? call.fail(answer.failure) : call.answer(frame(codecs.health.encode(answer)))));
      }),
    );
  } else if (path === HEALTH_WATCH_PATH) {
    const call = new ServerCall(stream, headers, path, ctx.options.grpcConnections.receiveTimeoutMs);
    call.readRequest((bytes) =>
      guarded(ctx, call, () => {
        const request = call.decode(codecs.health, bytes);
        if (request !== undefined) health.watch(watchStream(call, codecs, request.service));
      }),
    );
  } else {
    // As grpc-js: this one message is sent as it is, not percent-encoded.
    stream.respond(failureHeaders({ code: GRPC_STATUS.UNIMPLEMENTED, details: `The server does not implement the method ${String(path)}`, metadata: {} }, false), { endStream: true });
    stream.resume();
  }
}

/** Runs a call's handler: a throw or a rejection (a bug) is logged and answered INTERNAL, never let out. */
function guarded(ctx: ServiceContext, call: ServerCall, run: () => void | Promise<void>): void {
  const failed = (error: unknown): void => {
    ctx.logger.error({ err: error }, 'gRPC call failed');
    try {
      call.fail({ code: GRPC_STATUS.INTERNAL, details: 'internal error', metadata: {} });
    } catch {
      // The stream is gone.
    }
  };
  try {
    const result = run();
    if (result instanceof Promise) result.catch(failed);
  } catch (error) {
    failed(error);
  }
}

function shouldRateLimit(ctx: ServiceContext, codecs: GrpcCodecs, call: ServerCall, bytes: Buffer): Promise<void> | undefined {
  const message = call.decode(codecs.rateLimit, bytes);
  if (message === undefined) return undefined;
  const send = (answer: ShouldRateLimitAnswer): void => {
    if ('failure' in answer) {
      call.fail(answer.failure);
      return;
    }
    let framed: Buffer;
    try {
      framed = codecs.rateLimit.encodeFramed(answer.response);
    } catch (error) {
      ctx.logger.error({ err: error }, 'gRPC ShouldRateLimit: the response cannot be encoded');
      call.fail({ code: GRPC_STATUS.INTERNAL, details: 'Error serializing response', metadata: {} });
      return;
    }
    call.answer(framed, answer.degraded === undefined ? undefined : { [DEGRADED_HEADER]: answer.degraded });
  };
  const answer = answerShouldRateLimit(ctx, message);
  if (answer instanceof Promise) return answer.then(send);
  send(answer);
  return undefined;
}

/** A Watch call as the health service sees it: the response headers with the first message, then a message per change. */
function watchStream(call: ServerCall, codecs: GrpcCodecs, service: string): HealthStream {
  return {
    service,
    get cancelled() {
      return call.done;
    },
    write: (status) => call.write(codecs.health.encode({ status })),
    end: () => call.end(),
    onGone: (listener) => call.stream.once('close', listener),
  };
}

/** The answer's options: headers now, trailers once the data is out (respond() copies them). */
const ANSWER_OPTIONS = Object.freeze({ waitForTrailers: true });
const FAILURE_OPTIONS = Object.freeze({ endStream: true });

/** The 'wantTrailers' listener of a call that succeeded (shared: no closure per call). */
function sendOkTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

/**
 * One gRPC call on one HTTP/2 stream: reads the request message, keeps the deadline, and sends the
 * answer, more messages (Watch) or an error, each at most once and never on a closed stream.
 * Per call: one listener each for data, end and close, one timer (two with `grpc-timeout`), no
 * once() wrappers (each of these events comes once) and no reader unless the request comes split
 * or in several messages.
 */
class ServerCall {
  private finished = false;
  private headersSent = false;
  private deadline: NodeJS.Timeout | undefined;
  private receiving: NodeJS.Timeout | undefined;
  private readonly encoding: string;
  /** The request, when it came whole in the first DATA chunk (the usual case). */
  private request: RawMessage | undefined;
  /** Reads the request when it did not (a split message, or more than one). */
  private reader: MessageReader | undefined;

  constructor(
    readonly stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    private readonly path: string,
    private readonly receiveTimeoutMs: number,
  ) {
    const encoding = headers['grpc-encoding'];
    this.encoding = typeof encoding === 'string' ? encoding : 'identity';
    const timeout = headers['grpc-timeout'];
    if (typeof timeout === 'string') this.keepDeadline(timeout);
  }

  /**
   * Reads the one request message, then calls `handle` with its (decompressed) bytes once the
   * client half-closes, as grpc-js runs a unary handler.
   */
  readRequest(handle: (bytes: Buffer) => void): void {
    this.keepReceiveTimeout();
    this.stream.on('data', (chunk: Buffer) => this.receive(chunk));
    this.stream.on('end', () => {
      clearTimeout(this.receiving);
      if (this.done) return;
      const request = this.request;
      if (this.reader?.partial === true) this.fail(truncated(this.reader.progress));
      else if (request === undefined) this.fail({ code: GRPC_STATUS.UNIMPLEMENTED, details: `Received no request message for unary method ${this.path}`, metadata: {} });
      else if (!request.compressed) handle(request.bytes);
      else decompress(request, this.encoding, (bytes) => (Buffer.isBuffer(bytes) ? !this.done && handle(bytes) : this.fail(bytes)));
    });
    this.stream.on('close', () => {
      clearTimeout(this.receiving);
      this.clearDeadline();
    });
  }

  private receive(chunk: Buffer): void {
    if (this.done) return;
    if (this.request === undefined && this.reader === undefined && chunk.length >= 5) {
      // The usual case: one whole message, alone in the first chunk; read in place.
      const length = chunk.readUInt32BE(1);
      if (chunk.length === length + 5 && length <= MAX_MESSAGE_BYTES) {
        this.request = { compressed: chunk[0] === 1, bytes: chunk.subarray(5) };
        return;
      }
    }
    this.reader ??= new MessageReader();
    try {
      for (const message of this.reader.push(chunk)) {
        if (this.request !== undefined) {
          // As grpc-js: refused as soon as it arrives.
          this.fail({ code: GRPC_STATUS.UNIMPLEMENTED, details: `Received a second request message for unary method ${this.path}`, metadata: {} });
          return;
        }
        this.request = message;
      }
    } catch (error) {
      if (error instanceof FramingError) this.fail(error.failure);
      else throw error;
    }
  }

  /** True once the status is sent or the stream is gone. */
  get done(): boolean {
    return this.finished || this.stream.destroyed || this.stream.closed;
  }

  /** `bytes` as a message, or undefined after answering INTERNAL (as grpc-js) when they are not one. */
  decode<T>(codec: { decode(bytes: Buffer): T }, bytes: Buffer): T | undefined {
    try {
      return codec.decode(bytes);
    } catch (error) {
      this.fail({ code: GRPC_STATUS.INTERNAL, details: `Error deserializing request: ${(error as Error).message}`, metadata: {} });
      return undefined;
    }
  }

  /** The unary answer: headers (with `metadata`), the framed message, OK trailers. */
  answer(framed: Buffer, metadata?: Record<string, string>): void {
    if (this.done) return;
    this.sendHeaders(metadata);
    this.end(framed);
  }

  /** One more message of a server stream (the headers first, with the first one). */
  write(message: Uint8Array): void {
    if (this.done) return;
    this.sendHeaders();
    this.stream.write(frame(message));
  }

  /** Ends the call with status OK, after `last` (a framed message) if given. */
  end(last?: Buffer): void {
    if (this.done) return;
    this.sendHeaders();
    this.finished = true;
    this.clearDeadline();
    this.stream.on('wantTrailers', sendOkTrailers);
    this.stream.end(last);
  }

  /** Ends the call with an error status: trailers-only before any message, else in the trailers. */
  fail(failure: GrpcFailure): void {
    if (this.done) return;
    this.finished = true;
    this.clearDeadline();
    if (this.stream.closed) return;
    if (this.headersSent) {
      const trailers = failureTrailers(failure);
      this.stream.on('wantTrailers', () => this.stream.sendTrailers(trailers));
      this.stream.end();
    } else {
      this.stream.respond(failureHeaders(failure), FAILURE_OPTIONS);
    }
    // Whatever the client still sends is read and dropped, so its flow-control window stays open.
    this.stream.resume();
  }

  private sendHeaders(metadata?: Record<string, string>): void {
    if (this.headersSent) return;
    this.headersSent = true;
    this.stream.respond(metadata === undefined ? RESPONSE_HEADERS : { ...RESPONSE_HEADERS, ...metadata }, ANSWER_OPTIONS);
  }

  private keepDeadline(value: string): void {
    const timeoutMs = parseTimeout(value);
    if (timeoutMs === undefined) {
      process.nextTick(() => this.fail({ code: GRPC_STATUS.INTERNAL, details: `Invalid grpc-timeout value ${JSON.stringify(value)}`, metadata: {} }));
      return;
    }
    this.deadline = setTimeout(() => this.fail({ code: GRPC_STATUS.DEADLINE_EXCEEDED, details: 'Deadline exceeded', metadata: {} }), timeoutMs);
  }

  /**
   * A request that has not fully arrived within the receive timeout (--grpc-receive-timeout) is
   * answered DEADLINE_EXCEEDED and its stream reset, so a client cannot hold a call (and its
   * memory) open by never finishing its request. Cleared at the request's end or the stream's close.
   */
  private keepReceiveTimeout(): void {
    this.receiving = setTimeout(() => {
      if (this.done) return;
      this.fail({ code: GRPC_STATUS.DEADLINE_EXCEEDED, details: `The request did not arrive within ${this.receiveTimeoutMs} ms (the server's receive timeout); send the whole message and end the stream`, metadata: {} });
      // RST_STREAM(NO_ERROR) after the answer: stop sending, the call is over (RFC 9113, 8.1).
      this.stream.close(h2.NGHTTP2_NO_ERROR);
    }, this.receiveTimeoutMs);
  }

  private clearDeadline(): void {
    if (this.deadline !== undefined) clearTimeout(this.deadline);
    this.deadline = undefined;
  }
}

/** The status of a request that ended inside a message. */
function truncated(progress: { got: number; of: number | undefined }): GrpcFailure {
  const expected = progress.of === undefined ? 'a 5-byte message header' : `${progress.of} bytes (5-byte header + message)`;
  return { code: GRPC_STATUS.INTERNAL, details: `The request ended inside a message: got ${progress.got} bytes of ${expected}; send whole length-prefixed messages`, metadata: {} };
}
