/**
 * RateLimitRequest and RateLimitResponse by hand, the two messages of every ShouldRateLimit call
 * (protobufjs' generic decode + toObject and fromObject + encode were a tenth of the server's CPU
 * per call). They give what codec.ts's protobufjs codecs give: the same objects out of the same
 * bytes and the same bytes out of the same objects (test/service/grpc/rate-limit-wire.test.ts
 * checks both against protobufjs on random messages, unknown fields of every wire type, and
 * garbage), quirks included where grpc-js shows them (a string longer than what is left is cut
 * short, not refused; an over-long uint32 varint keeps its low bits). The decoder is stricter than protobufjs on malformed bytes (a known field with
 * another wire type, a truncated 64-bit varint): those throw, and the call is answered INTERNAL
 * as any undecodable request. google.protobuf.Struct (dynamic_metadata, off by default) is still
 * encoded by protobufjs.
 */
import type { GrpcDescriptorStatus, GrpcRateLimitRequest, GrpcRateLimitResponse } from './messages.js';

type Descriptor = GrpcRateLimitRequest['descriptors'][number];

/** Why bytes are not a RateLimitRequest (the call's INTERNAL details say it, in protobufjs' words where it has them). */
export class WireError extends Error {}

/** Reading `bytes` more bytes at `pos` passes `end`. */
function outOfRange(pos: number, bytes: number, end: number): WireError {
  return new WireError(`index out of range: ${pos} + ${bytes} > ${end}`);
}

/** envoy.type.v3.RateLimitUnit and RateLimitResponse.RateLimit.Unit: the same names and numbers. */
const UNIT_BY_NUMBER: readonly string[] = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK'];
const UNIT_NUMBER: ReadonlyMap<unknown, number> = new Map(UNIT_BY_NUMBER.map((name, i) => [name, i]));
/** RateLimitResponse.Code. */
const CODE_NUMBER: ReadonlyMap<unknown, number> = new Map([['UNKNOWN', 0], ['OK', 1], ['OVER_LIMIT', 2]]);

/** Node's Buffer methods without the argument checks of toString/write (protobufjs uses them too). */
interface RawBuffer extends Buffer {
  utf8Slice(start: number, end: number): string;
  utf8Write(value: string, offset: number): number;
}

/** protobufjs' nesting limit (Reader.recursionLimit), for groups inside unknown fields. */
const MAX_DEPTH = 100;
const TWO_32 = 4_294_967_296;

/** A cursor over one message's bytes. */
class Cursor {
  pos: number;
  constructor(
    readonly buf: RawBuffer,
    start: number,
    public end: number,
  ) {
    this.pos = start;
  }

  /**
   * A varint read as protobufjs' Reader.uint32 reads it (so both servers read the same numbers):
   * the low 32 bits of up to five bytes; a longer one (a negative int32) has its other five skipped.
   */
  uint32(): number {
    const buf = this.buf;
    let value = 0;
    for (let i = 0; i < 5; i++) {
      if (this.pos >= this.end) throw outOfRange(this.pos, 1, this.end);
      const byte = buf[this.pos++]!;
      value = (value | ((i === 4 ? byte & 15 : byte & 127) << (7 * i))) >>> 0;
      if (byte < 128) return value;
    }
    if (this.pos + 5 > this.end) throw outOfRange(this.pos, 5, this.end);
    this.pos += 5;
    return value;
  }

  /** A uint64 varint as a number (protobufjs' LongBits.toNumber(true): lo + hi × 2³²). */
  uint64(): number {
    const buf = this.buf;
    let lo = 0;
    let hi = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw outOfRange(this.pos, 1, this.end);
      const byte = buf[this.pos++]!;
      if (i < 4) lo = (lo | ((byte & 127) << (7 * i))) >>> 0;
      else if (i === 4) {
        lo = (lo | ((byte & 127) << 28)) >>> 0;
        hi = (byte & 127) >> 4;
      } else hi = (hi | ((byte & 127) << (7 * (i - 5) + 3))) >>> 0;
      if (byte < 128) return lo + hi * TWO_32;
    }
    throw new WireError('invalid varint encoding');
  }

  /** The end of a length-delimited field that starts here. */
  delimited(): number {
    const length = this.uint32();
    const end = this.pos + length;
    if (end > this.end) throw outOfRange(this.pos, length, this.end);
    return end;
  }

  /** A string; as protobufjs reads one from a Buffer, a length past the end takes what there is (grpc-js reads the same string). */
  string(): string {
    const length = this.uint32();
    const end = Math.min(this.pos + length, this.end);
    const start = this.pos;
    this.pos = end;
    return this.buf.utf8Slice(start, end);
  }

  /** Skips an unknown field (protobufjs' Reader.skipType). */
  skip(wireType: number, depth: number): void {
    if (depth > MAX_DEPTH) throw new WireError('maximum nesting depth exceeded');
    if (wireType === 0) {
      do {
        if (this.pos >= this.end) throw outOfRange(this.pos, 1, this.end);
      } while (this.buf[this.pos++]! & 128);
    } else if (wireType === 2) this.pos = this.delimited();
    else if (wireType === 1 || wireType === 5) {
      const size = wireType === 1 ? 8 : 4;
      if (this.pos + size > this.end) throw outOfRange(this.pos, size, this.end);
      this.pos += size;
    } else if (wireType === 3) {
      for (let tag = this.uint32(); (tag & 7) !== 4; tag = this.uint32()) this.skip(tag & 7, depth + 1);
    } else throw new WireError(`invalid wire type ${wireType} at offset ${this.pos}`);
  }

  /** Runs `read` on the embedded message that starts here, then continues after it. */
  embedded<T>(read: (cursor: Cursor) => T): T {
    const end = this.delimited();
    const outer = this.end;
    this.end = end;
    const value = read(this);
    this.end = outer;
    return value;
  }
}

/** `tag`'s wire type must be `expected` for a known field. */
function expectWire(tag: number, expected: number): void {
  if ((tag & 7) !== expected) throw new WireError(`field ${tag >>> 3} has wire type ${tag & 7}, not ${expected}`);
}

/** Bytes → RateLimitRequest, as protobufjs' decode + toObject(LOADER_OPTIONS) give it. Throws a {@link WireError} on bytes that are not one. */
export function decodeRateLimitRequest(bytes: Uint8Array): GrpcRateLimitRequest {
  const buf = (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)) as RawBuffer;
  const cursor = new Cursor(buf, 0, buf.length);
  const message: GrpcRateLimitRequest = { domain: '', descriptors: [], hits_addend: 0 };
  while (cursor.pos < cursor.end) {
    const tag = cursor.uint32();
    const field = tag >>> 3;
    if (field === 1) {
      expectWire(tag, 2);
      message.domain = cursor.string();
    } else if (field === 2) {
      expectWire(tag, 2);
      message.descriptors.push(cursor.embedded(readDescriptor));
    } else if (field === 3) {
      expectWire(tag, 0);
      message.hits_addend = cursor.uint32();
    } else cursor.skip(tag & 7, 0);
  }
  return message;
}

function readDescriptor(cursor: Cursor): Descriptor {
  const descriptor: Descriptor = { entries: [], limit: null, hits_addend: null };
  while (cursor.pos < cursor.end) {
    const tag = cursor.uint32();
    const field = tag >>> 3;
    if (field === 1) {
      expectWire(tag, 2);
      descriptor.entries.push(cursor.embedded(readEntry));
    } else if (field === 2) {
      expectWire(tag, 2);
      // As protobufjs: a repeated embedded message replaces the earlier one (no merge).
      descriptor.limit = cursor.embedded(readOverride);
    } else if (field === 3) {
      expectWire(tag, 2);
      descriptor.hits_addend = cursor.embedded(readUInt64Value);
    } else cursor.skip(tag & 7, 1);
  }
  return descriptor;
}

function readEntry(cursor: Cursor): { key: string; value: string } {
  const entry = { key: '', value: '' };
  while (cursor.pos < cursor.end) {
    const tag = cursor.uint32();
    const field = tag >>> 3;
    if (field === 1 || field === 2) {
      expectWire(tag, 2);
      if (field === 1) entry.key = cursor.string();
      else entry.value = cursor.string();
    } else cursor.skip(tag & 7, 2);
  }
  return entry;
}

function readOverride(cursor: Cursor): NonNullable<Descriptor['limit']> {
  const limit: NonNullable<Descriptor['limit']> = { requests_per_unit: 0, unit: 'UNKNOWN' };
  while (cursor.pos < cursor.end) {
    const tag = cursor.uint32();
    const field = tag >>> 3;
    if (field === 1) {
      expectWire(tag, 0);
      limit.requests_per_unit = cursor.uint32();
    } else if (field === 2) {
      expectWire(tag, 0);
      // int32; a number with no name stays a number (protobufjs' toObject with enums: String).
      const unit = cursor.uint32() | 0;
      limit.unit = UNIT_BY_NUMBER[unit] ?? unit;
    } else cursor.skip(tag & 7, 2);
  }
  return limit;
}

function readUInt64Value(cursor: Cursor): { value: number } {
  const wrapper = { value: 0 };
  while (cursor.pos < cursor.end) {
    const tag = cursor.uint32();
    if (tag >>> 3 === 1) {
      expectWire(tag, 0);
      wrapper.value = cursor.uint64();
    } else cursor.skip(tag & 7, 2);
  }
  return wrapper;
}

/** A growing output buffer (one per server, reused by every call: JavaScript runs one call at a time). */
class Output {
  buf = Buffer.allocUnsafe(4096) as RawBuffer;
  pos = 0;

  private room(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes)) as RawBuffer;
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** An unsigned varint of up to 53 bits (a uint32, or an int64 that is a non-negative safe integer). */
  varint(value: number): void {
    this.room(10);
    const buf = this.buf;
    while (value >= 128) {
      buf[this.pos++] = (value % 128) | 128;
      value = Math.floor(value / 128);
    }
    buf[this.pos++] = value;
  }

  string(field: number, value: string): void {
    this.varint((field << 3) | 2);
    const bytes = value.length < 43 ? -1 : Buffer.byteLength(value);
    if (bytes === -1) {
      // At most 42 UTF-16 units: at most 126 bytes, a one-byte length.
      this.room(1 + 3 * value.length);
      const written = this.buf.utf8Write(value, this.pos + 1);
      this.buf[this.pos] = written;
      this.pos += 1 + written;
    } else {
      this.varint(bytes);
      this.room(bytes);
      this.pos += this.buf.utf8Write(value, this.pos);
    }
  }

  bytes(field: number, value: Uint8Array): void {
    this.varint((field << 3) | 2);
    this.varint(value.length);
    this.room(value.length);
    this.buf.set(value, this.pos);
    this.pos += value.length;
  }

  /** Opens an embedded message: its tag, and one byte kept for its length. */
  open(field: number): number {
    this.varint((field << 3) | 2);
    this.room(1);
    return this.pos++;
  }

  /** Closes the embedded message opened at `at`: its length written, the bytes moved when it needs more than one. */
  close(at: number): void {
    const length = this.pos - at - 1;
    if (length < 128) {
      this.buf[at] = length;
      return;
    }
    let size = 1;
    for (let rest = length >>> 7; rest > 0; rest >>>= 7) size++;
    this.room(size - 1);
    this.buf.copy(this.buf, at + size, at + 1, this.pos);
    this.pos += size - 1;
    const end = this.pos;
    this.pos = at;
    this.varint(length);
    this.pos = end;
  }
}

/** What the hand encoder does not write itself: google.protobuf.Struct, and a response it does not know how to write. */
export interface ResponseFallback {
  /** The bytes of a google.protobuf.Struct (as protobufjs' fromObject + encode write it). */
  encodeStruct(struct: NonNullable<GrpcRateLimitResponse['dynamic_metadata']>): Uint8Array;
  /** The whole response by protobufjs. */
  encodeResponse(response: GrpcRateLimitResponse): Uint8Array;
}

/**
 * RateLimitResponse → a framed gRPC message (flag 0, length, bytes), the bytes protobufjs'
 * fromObject + encode write (fields in number order, fields present written even when 0).
 * Anything outside what Tollgate sends (a value of another type, an unknown enum name, a duration
 * that is not a non-negative safe integer) goes to `fallback.encodeResponse`.
 */
export function responseEncoder(fallback: ResponseFallback): (response: GrpcRateLimitResponse) => Buffer {
  const out = new Output();
  return (response) => {
    out.pos = 5;
    if (!writeResponse(out, response, fallback)) return frameOf(fallback.encodeResponse(response));
    const framed = Buffer.allocUnsafe(out.pos);
    out.buf.copy(framed, 0, 0, out.pos);
    framed[0] = 0;
    framed.writeUInt32BE(out.pos - 5, 1);
    return framed;
  };
}

function frameOf(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(message.length + 5);
  framed[0] = 0;
  framed.writeUInt32BE(message.length, 1);
  framed.set(message, 5);
  return framed;
}

/** False when the response holds something only protobufjs writes. */
function writeResponse(out: Output, response: GrpcRateLimitResponse, fallback: ResponseFallback): boolean {
  const code = CODE_NUMBER.get(response.overall_code);
  if (code === undefined) return false;
  out.varint(8);
  out.varint(code);
  for (const status of response.statuses) {
    const at = out.open(2);
    if (!writeStatus(out, status)) return false;
    out.close(at);
  }
  for (const header of response.response_headers_to_add) {
    const at = out.open(3);
    if (typeof header.key !== 'string' || typeof header.value !== 'string') return false;
    out.string(1, header.key);
    out.string(2, header.value);
    out.close(at);
  }
  if (response.dynamic_metadata !== undefined && response.dynamic_metadata !== null) out.bytes(6, fallback.encodeStruct(response.dynamic_metadata));
  return true;
}

function writeStatus(out: Output, status: GrpcDescriptorStatus): boolean {
  const code = CODE_NUMBER.get(status.code);
  if (code === undefined) return false;
  out.varint(8);
  out.varint(code);
  const limit = status.current_limit;
  if (limit !== undefined && limit !== null) {
    const unit = UNIT_NUMBER.get(limit.unit);
    if (unit === undefined || typeof limit.requests_per_unit !== 'number') return false;
    const at = out.open(2);
    out.varint(8);
    out.varint(limit.requests_per_unit >>> 0);
    out.varint(16);
    out.varint(unit);
    if (limit.name !== undefined && limit.name !== null) {
      if (typeof limit.name !== 'string') return false;
      out.string(3, limit.name);
    }
    out.close(at);
  }
  if (status.limit_remaining !== undefined && status.limit_remaining !== null) {
    if (typeof status.limit_remaining !== 'number') return false;
    out.varint(24);
    out.varint(status.limit_remaining >>> 0);
  }
  const reset = status.duration_until_reset;
  if (reset !== undefined && reset !== null) {
    if (!Number.isSafeInteger(reset.seconds) || reset.seconds < 0 || !Number.isSafeInteger(reset.nanos) || reset.nanos < 0 || reset.nanos >= TWO_32 / 2) return false;
    const at = out.open(4);
    out.varint(8);
    out.varint(reset.seconds);
    out.varint(16);
    out.varint(reset.nanos);
    out.close(at);
  }
  return true;
}
