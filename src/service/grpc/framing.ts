/**
 * gRPC over HTTP/2 as the node:http2 server speaks it (the protocol is small): messages framed as a
 * compressed flag and a 4-byte big-endian length, read back across any split into DATA frames;
 * message decompression (identity, deflate, gzip: what grpc-js accepts); `grpc-timeout`; and the
 * headers and trailers grpc-js sends, so both servers' answers are the same on the wire.
 */
import { gunzip, inflate } from 'node:zlib';
import { GRPC_STATUS, MAX_MESSAGE_BYTES, type GrpcFailure } from './messages.js';

/** The message encodings accepted (`grpc-encoding`), as grpc-js lists them in `grpc-accept-encoding`. */
export const ACCEPTED_ENCODINGS = 'identity,deflate,gzip';

/** The response headers of an answer, as grpc-js sends them (its metadata goes after them). */
export const RESPONSE_HEADERS: Readonly<Record<string, string | number>> = Object.freeze({
  ':status': 200,
  'content-type': 'application/grpc+proto',
  'grpc-accept-encoding': ACCEPTED_ENCODINGS,
  'grpc-encoding': 'identity',
});

/** The trailers of a call that succeeded. */
export const OK_TRAILERS: Readonly<Record<string, string | number>> = Object.freeze({ 'grpc-status': GRPC_STATUS.OK, 'grpc-message': 'OK' });

/**
 * The headers of a trailers-only answer (an error before any message): status, message, then
 * metadata. grpc-js sends its unknown-method message as it is (`encoded` false), every other one percent-encoded.
 */
export function failureHeaders(failure: GrpcFailure, encoded = true): Record<string, string | number> {
  return { 'grpc-status': failure.code, 'grpc-message': encoded ? percentEncode(failure.details) : failure.details, ':status': 200, 'content-type': 'application/grpc+proto', ...failure.metadata };
}

/** The trailers of a call that failed after its response headers went out. */
export function failureTrailers(failure: GrpcFailure): Record<string, string | number> {
  return { 'grpc-status': failure.code, 'grpc-message': percentEncode(failure.details), ...failure.metadata };
}

/**
 * `grpc-message` percent-encoded as grpc-js does it (encodeURI; clients decodeURI it). A string
 * encodeURI refuses (a lone surrogate) is encoded byte by byte as the gRPC spec says instead.
 */
export function percentEncode(text: string): string {
  try {
    return encodeURI(text);
  } catch {
    let out = '';
    for (const byte of Buffer.from(text, 'utf8')) out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    return out;
  }
}

/** A message framed for the wire: flag 0 (not compressed), the length, the bytes. */
export function frame(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(message.length + 5);
  framed[0] = 0;
  framed.writeUInt32BE(message.length, 1);
  framed.set(message, 5);
  return framed;
}

const TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1_000, m: 1, u: 0.001, n: 0.000_001 };

/**
 * `grpc-timeout` (the gRPC spec: at most 8 digits and a unit, H M S m u n) in whole ms, as grpc-js
 * rounds it; undefined when the value is not one.
 */
export function parseTimeout(value: string): number | undefined {
  const match = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (match === null) return undefined;
  return (Number(match[1]) * TIMEOUT_UNIT_MS[match[2]!]!) | 0;
}

/** One message as it came: its compressed flag and its bytes (still compressed if flagged). */
export interface RawMessage {
  readonly compressed: boolean;
  readonly bytes: Buffer;
}

/** A framing error: the status to answer with. */
export class FramingError extends Error {
  constructor(readonly failure: GrpcFailure) {
    super(failure.details);
  }
}

/**
 * Reads length-prefixed messages from DATA chunks split anywhere (a header across chunks, several
 * messages in one). A length over {@link MAX_MESSAGE_BYTES} is refused as soon as its header is
 * read, in grpc-js's words, before the bytes arrive.
 */
export class MessageReader {
  /** The current message's header, when it arrived split across chunks. */
  private header: Buffer | undefined;
  private headerFilled = 0;
  private body: Buffer | undefined;
  private bodyFilled = 0;
  private compressed = false;

  /** True when the bytes so far end inside a message (a truncated frame, if the stream ends here). */
  get partial(): boolean {
    return this.headerFilled > 0 || this.body !== undefined;
  }

  /** How many bytes of the current message arrived, and how many it has. */
  get progress(): { got: number; of: number | undefined } {
    return this.body === undefined ? { got: this.headerFilled, of: undefined } : { got: 5 + this.bodyFilled, of: 5 + this.body.length };
  }

  /** The whole messages `chunk` completes; throws a {@link FramingError} for an oversized one. */
  push(chunk: Buffer): RawMessage[] {
    const messages: RawMessage[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      if (this.body === undefined) {
        let length: number;
        if (this.headerFilled === 0 && chunk.length - offset >= 5) {
          // The usual case: the whole header in this chunk, read in place.
          this.compressed = chunk[offset] === 1;
          length = chunk.readUInt32BE(offset + 1);
          offset += 5;
        } else {
          this.header ??= Buffer.alloc(5);
          const take = Math.min(5 - this.headerFilled, chunk.length - offset);
          chunk.copy(this.header, this.headerFilled, offset, offset + take);
          this.headerFilled += take;
          offset += take;
          if (this.headerFilled < 5) break;
          this.headerFilled = 0;
          this.compressed = this.header[0] === 1;
          length = this.header.readUInt32BE(1);
        }
        if (length > MAX_MESSAGE_BYTES) {
          throw new FramingError({ code: GRPC_STATUS.RESOURCE_EXHAUSTED, details: `Received message larger than max (${length} vs ${MAX_MESSAGE_BYTES})`, metadata: {} });
        }
        // A whole message inside this chunk (the usual case): no copy.
        if (chunk.length - offset >= length) {
          messages.push({ compressed: this.compressed, bytes: chunk.subarray(offset, offset + length) });
          offset += length;
          continue;
        }
        this.body = Buffer.allocUnsafe(length);
        this.bodyFilled = 0;
      }
      const take = Math.min(this.body.length - this.bodyFilled, chunk.length - offset);
      chunk.copy(this.body, this.bodyFilled, offset, offset + take);
      this.bodyFilled += take;
      offset += take;
      if (this.bodyFilled === this.body.length) {
        messages.push({ compressed: this.compressed, bytes: this.body });
        this.body = undefined;
      }
    }
    return messages;
  }
}

/**
 * A message's bytes decompressed by `encoding` (the request's `grpc-encoding`; grpc-js reads an
 * unflagged message as identity whatever it says). Calls back with the bytes or the failure:
 * UNIMPLEMENTED for an encoding not accepted (naming those that are), RESOURCE_EXHAUSTED past
 * {@link MAX_MESSAGE_BYTES} decompressed, INTERNAL for bytes that do not decompress.
 */
export function decompress(message: RawMessage, encoding: string, done: (result: Buffer | GrpcFailure) => void): void {
  if (!message.compressed || encoding === 'identity') {
    done(message.bytes);
    return;
  }
  if (encoding !== 'deflate' && encoding !== 'gzip') {
    done({
      code: GRPC_STATUS.UNIMPLEMENTED,
      details: `Received message compressed with unsupported encoding ${JSON.stringify(encoding)}; accepted: ${ACCEPTED_ENCODINGS.split(',').join(', ')}`,
      metadata: { 'grpc-accept-encoding': ACCEPTED_ENCODINGS },
    });
    return;
  }
  (encoding === 'gzip' ? gunzip : inflate)(message.bytes, { maxOutputLength: MAX_MESSAGE_BYTES }, (error, bytes) => {
    if (error === null) done(bytes);
    else if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      done({ code: GRPC_STATUS.RESOURCE_EXHAUSTED, details: `Received message that decompresses to a size larger than ${MAX_MESSAGE_BYTES}`, metadata: {} });
    } else done({ code: GRPC_STATUS.INTERNAL, details: 'Failed to decompress message', metadata: {} });
  });
}
