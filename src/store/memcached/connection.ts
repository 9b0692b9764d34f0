/**
 * One memcached server over node:net, speaking the text protocol (memcached's protocol.txt): the
 * few commands the store needs (`get`, `gets`, `add`, `cas`, `incr`, `decr`, `delete`, `version`),
 * pipelined on one socket, replies matched to commands in order. A command that gets no reply
 * within `commandTimeoutMs` drops the socket (a stopped server must not hold calls forever); a
 * dropped socket fails every command in flight with {@link StoreUnavailableError}; commands fail
 * at once for `reconnectDelayMs`, then the next opens a new socket. A dropped connection is also
 * opened again by itself (every `reconnectDelayMs`, backing off to 2 s), so health reports follow
 * the server without traffic.
 */
import { Socket } from 'node:net';
import { StoreUnavailableError } from '../../errors.js';

/** A `gets` hit: the value and its compare-and-set token. */
export interface CasValue {
  readonly value: string;
  readonly cas: string;
}

/** What a storage command answered (`add`, `cas`): stored, or why not. */
export type StoreReply = 'STORED' | 'NOT_STORED' | 'EXISTS' | 'NOT_FOUND';

/** A command's reply text that is an error of the server's (`ERROR`, `CLIENT_ERROR …`, `SERVER_ERROR …`). */
export class MemcachedReplyError extends Error {}

interface Pending {
  /** `value` for retrievals (VALUE … END), `line` for the rest. */
  readonly kind: 'value' | 'line';
  readonly sentAt: number;
  resolve(reply: unknown): void;
  reject(error: Error): void;
}

const CRLF = Buffer.from('\r\n');
const MAX_RECONNECT_DELAY_MS = 2_000;
const ERROR_REPLY = /^(ERROR|CLIENT_ERROR|SERVER_ERROR)\b/;

export interface ConnectionOptions {
  readonly host: string;
  readonly port: number;
  readonly commandTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly reconnectDelayMs: number;
}

export class MemcachedConnection {
  readonly address: string;
  private socket: Socket | undefined;
  private connected = false;
  private readonly pending: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  private lastFailureAt = -Infinity;
  private lastError: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Reconnections tried by themselves since the last connection (the backoff's exponent). */
  private retries = 0;

  constructor(private readonly options: ConnectionOptions) {
    this.address = `${options.host}:${options.port}`;
  }

  /** Whether a socket is open to the server now. */
  get isConnected(): boolean {
    return this.connected;
  }

  /** The value of `key`, or undefined. */
  async get(key: string): Promise<string | undefined> {
    const hit = (await this.send(`get ${key}\r\n`, 'value')) as CasValue | undefined;
    return hit?.value;
  }

  /** The value of `key` and its compare-and-set token, or undefined. */
  gets(key: string): Promise<CasValue | undefined> {
    return this.send(`gets ${key}\r\n`, 'value') as Promise<CasValue | undefined>;
  }

  /** Stores `value` only if `key` holds nothing. `ttl` in memcached's exptime (seconds, or a Unix time past 30 days). */
  add(key: string, value: string, ttl: number): Promise<StoreReply> {
    return this.send(`add ${key} 0 ${ttl} ${Buffer.byteLength(value)}\r\n${value}\r\n`, 'line') as Promise<StoreReply>;
  }

  /** Stores `value` only if `key` still has compare-and-set token `cas`. */
  cas(key: string, value: string, ttl: number, cas: string): Promise<StoreReply> {
    return this.send(`cas ${key} 0 ${ttl} ${Buffer.byteLength(value)} ${cas}\r\n${value}\r\n`, 'line') as Promise<StoreReply>;
  }

  /** Adds `delta` to the number `key` holds: the new number, or undefined when the key holds nothing. */
  incr(key: string, delta: number): Promise<number | undefined> {
    return this.counter('incr', key, delta);
  }

  decr(key: string, delta: number): Promise<number | undefined> {
    return this.counter('decr', key, delta);
  }

  /** Whether `key` held something (and now holds nothing). */
  async delete(key: string): Promise<boolean> {
    return (await this.send(`delete ${key}\r\n`, 'line')) === 'DELETED';
  }

  /** The server's version (a round trip: what `ready()` waits on). */
  async version(): Promise<string> {
    return String(await this.send('version\r\n', 'line')).replace(/^VERSION /, '');
  }

  close(): void {
    this.closed = true;
    this.drop(new StoreUnavailableError(`the memcached connection to ${this.address} was closed`));
  }

  private async counter(command: 'incr' | 'decr', key: string, delta: number): Promise<number | undefined> {
    const line = String(await this.send(`${command} ${key} ${delta}\r\n`, 'line'));
    return line === 'NOT_FOUND' ? undefined : Number(line);
  }

  private send(command: string, kind: Pending['kind']): Promise<unknown> {
    const socket = this.open();
    if (socket === undefined) return Promise.reject(this.unavailable());
    return new Promise((resolve, reject) => {
      this.pending.push({ kind, sentAt: performance.now(), resolve, reject });
      socket.write(command);
    });
  }

  private unavailable(): StoreUnavailableError {
    const why = this.closed ? 'the store was closed' : (this.lastError ?? 'not connected');
    return new StoreUnavailableError(`memcached at ${this.address} is unavailable (${why}); check that it is running and the address is right`);
  }

  /**
   * The socket, opened if there is none and the last failure is `reconnectDelayMs` old (`waited`:
   * the reconnect timer's own call, which has waited: a timer may fire a little before
   * performance.now() says the delay has passed, and a refusal then would end the reconnections).
   */
  private open(waited = false): Socket | undefined {
    if (this.socket !== undefined) return this.socket;
    if (this.closed || (!waited && performance.now() - this.lastFailureAt < this.options.reconnectDelayMs)) return undefined;
    const socket = new Socket();
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (error) => this.drop(new StoreUnavailableError(`memcached at ${this.address} is unavailable: ${error.message}`, { cause: error }), socket));
    socket.on('close', () => this.drop(new StoreUnavailableError(`memcached at ${this.address} closed the connection`), socket));
    socket.once('connect', () => {
      this.connected = true;
      this.lastError = undefined;
      this.retries = 0;
    });
    socket.connect(this.options.port, this.options.host);
    this.timer ??= setInterval(() => this.checkTimeouts(), Math.max(10, Math.min(this.options.commandTimeoutMs, this.options.connectTimeoutMs) / 4));
    this.timer.unref();
    return socket;
  }

  /** Drops a socket that has not connected in time, or whose oldest command has waited too long. */
  private checkTimeouts(): void {
    const oldest = this.pending[0];
    if (oldest === undefined) return;
    const waited = performance.now() - oldest.sentAt;
    const limit = this.connected ? this.options.commandTimeoutMs : this.options.connectTimeoutMs;
    if (waited >= limit) this.drop(new StoreUnavailableError(`memcached at ${this.address} did not answer within ${Math.round(waited)} ms`));
  }

  /** Closes the socket (only `which`, when given) and fails every command in flight with `error`. */
  private drop(error: StoreUnavailableError, which?: Socket): void {
    if (which !== undefined && which !== this.socket) return;
    const socket = this.socket;
    this.socket = undefined;
    this.connected = false;
    this.buffer = Buffer.alloc(0);
    this.lastFailureAt = performance.now();
    this.lastError = error.message;
    socket?.destroy();
    if (this.closed && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
    for (const pending of this.pending.splice(0)) pending.reject(error);
    if (!this.closed) this.reconnectLater();
  }

  /** Opens the connection again after the reconnect delay, backing off to 2 s while it keeps failing. */
  private reconnectLater(): void {
    const delay = Math.min(Math.max(this.options.reconnectDelayMs, 10) * 2 ** Math.min(this.retries, 8), MAX_RECONNECT_DELAY_MS);
    this.retries += 1;
    setTimeout(() => {
      if (!this.closed && this.socket === undefined) this.open(true);
    }, delay).unref();
  }

  private receive(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    let offset = 0;
    while (this.pending.length > 0) {
      const used = this.pending[0]!.kind === 'value' ? this.parseValue(offset) : this.parseLine(offset);
      if (used === 0) break;
      offset += used;
    }
    this.buffer = offset === this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(offset);
  }

  /** A one-line reply at `offset`: bytes used (0: incomplete). */
  private parseLine(offset: number): number {
    const end = this.buffer.indexOf(CRLF, offset);
    if (end < 0) return 0;
    this.answer(this.buffer.toString('latin1', offset, end));
    return end + 2 - offset;
  }

  /** `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n` then `END\r\n`, or `END\r\n` alone: bytes used (0: incomplete). */
  private parseValue(offset: number): number {
    const end = this.buffer.indexOf(CRLF, offset);
    if (end < 0) return 0;
    const line = this.buffer.toString('latin1', offset, end);
    if (!line.startsWith('VALUE ')) {
      this.answer(line === 'END' ? undefined : line);
      return end + 2 - offset;
    }
    const fields = line.split(' ');
    const bytes = Number(fields[3]);
    const dataEnd = end + 2 + bytes;
    // The data, its CRLF, and END\r\n.
    if (this.buffer.length < dataEnd + 7) return 0;
    this.answer({ value: this.buffer.toString('utf8', end + 2, dataEnd), cas: fields[4] ?? '' });
    return dataEnd + 7 - offset;
  }

  private answer(reply: unknown): void {
    const pending = this.pending.shift()!;
    if (typeof reply === 'string' && ERROR_REPLY.test(reply)) pending.reject(new MemcachedReplyError(`memcached at ${this.address} answered ${reply}`));
    else pending.resolve(reply);
  }
}
