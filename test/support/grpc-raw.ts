/**
 * gRPC calls at the HTTP/2 level, for tests that look at the wire: what a server answers (headers
 * in order, message bytes, trailers) to hand-made requests, framed correctly or not, in any split
 * into DATA frames. Uses node:http2's client only; no gRPC library.
 */
import { connect, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { encodeFields } from './grpc-client.js';

/** An answer as it came off the wire; `date` left out (it differs by the second). */
export interface RawAnswer {
  /** Response headers in the order received (pseudo-headers first, as HTTP/2 sends them). */
  readonly headers: [string, string][];
  /** The DATA bytes (framed messages), concatenated. */
  readonly data: Buffer;
  /** Trailers in the order received; [] for a trailers-only answer. */
  readonly trailers: [string, string][];
  /** grpc-status, from the trailers or (trailers-only) the headers; undefined if none. */
  readonly status: number | undefined;
  /** grpc-message, percent-decoded. */
  readonly message: string | undefined;
}

export interface RawRequest {
  readonly path: string;
  /** The body, one DATA write per chunk (each written in its own event-loop turn). */
  readonly chunks: Buffer[];
  readonly headers?: Record<string, string>;
  /** Leave the request open (no END_STREAM): for deadlines. */
  readonly keepOpen?: boolean;
}

export const SHOULD_RATE_LIMIT_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
export const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';

/** A message framed for gRPC: flag (0, or 1 for compressed), 4-byte length, bytes. */
export function grpcFrame(message: Buffer, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** A RateLimitRequest on the wire: domain, descriptors of entries, optional request hits_addend. */
export function rateLimitRequest(domain: string, descriptors: Record<string, string>[], hits?: number): Buffer {
  const entry = (key: string, value: string) => encodeFields([[1, key], [2, value]]);
  const descriptor = (pairs: Record<string, string>) => encodeFields(Object.entries(pairs).map(([key, value]) => [1, entry(key, value)]));
  return encodeFields([[1, domain], ...descriptors.map((pairs): [number, Buffer] => [2, descriptor(pairs)]), ...(hits !== undefined ? [[3, hits] as [number, number]] : [])]);
}

/** `message` gzip-compressed and framed with the compressed flag. */
export function gzipFrame(message: Buffer): Buffer {
  return grpcFrame(gzipSync(message), true);
}

/** One HTTP/2 connection making raw gRPC calls. */
export class RawGrpcSession {
  readonly session: ClientHttp2Session;

  constructor(port: number) {
    this.session = connect(`http://127.0.0.1:${port}`);
    this.session.on('error', () => {});
  }

  /** Makes one call; resolves when the stream closes. */
  call(request: RawRequest): Promise<RawAnswer> {
    const stream = this.session.request({ ':method': 'POST', ':path': request.path, 'content-type': 'application/grpc', te: 'trailers', ...request.headers });
    let headers: [string, string][] = [];
    let trailers: [string, string][] = [];
    const data: Buffer[] = [];
    const entries = (received: IncomingHttpHeaders): [string, string][] =>
      Object.entries(received)
        .filter(([name]) => name !== 'date')
        .map(([name, value]) => [name, String(value)]);
    stream.on('response', (received) => (headers = entries(received)));
    stream.on('trailers', (received) => (trailers = entries(received)));
    stream.on('data', (chunk: Buffer) => data.push(chunk));
    // The server ended its side (a request left open included): done.
    stream.on('end', () => stream.close());
    stream.on('error', () => {});
    const done = new Promise<RawAnswer>((resolve) =>
      stream.on('close', () => {
        const from = trailers.length > 0 ? trailers : headers;
        const status = from.find(([name]) => name === 'grpc-status')?.[1];
        const message = from.find(([name]) => name === 'grpc-message')?.[1];
        resolve({ headers, data: Buffer.concat(data), trailers, status: status === undefined ? undefined : Number(status), message: message === undefined ? undefined : decodeURI(message) });
      }),
    );
    void (async () => {
      for (const chunk of request.chunks) {
        if (stream.closed) return;
        stream.write(chunk);
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (request.keepOpen !== true && !stream.closed) stream.end();
    })();
    return done;
  }

  close(): void {
    this.session.close();
  }
}
