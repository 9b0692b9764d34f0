/**
 * Closing the HTTP server without dropping a request it accepted. node:http's own `close()` destroys
 * every connection it deems idle, including one accepted a moment ago whose request has not been
 * read yet (its client sees a reset for a request it sent), and keep-alive connections whose next
 * request may be on the wire. So connections are followed here. Once closing: every answer says
 * `Connection: close`; a connection with a request in flight is left to finish; one between
 * requests is closed once it has been quiet for {@link QUIET_MS} (a busy client gets its next
 * answer with `Connection: close` instead); a new one gets {@link FRESH_GRACE_MS} to send its
 * first request; past the shutdown timeout, all are cut.
 */
import { Server as NetServer, type Socket } from 'node:net';
import { STATUS_CODES, Server as HttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import { Server as TlsServer } from 'node:tls';
import type { Logger } from 'pino';

/** How long a connection accepted before the close may take to send its first request. */
export const FRESH_GRACE_MS = 1_000;

/** How long a keep-alive connection must have been quiet to be closed between requests. */
export const QUIET_MS = 250;

/** How often connections are looked at while closing. */
const SWEEP_MS = 20;

interface ConnectionState {
  /** Answers in progress on it (none or the current one). */
  readonly open: Set<ServerResponse>;
  /** Requests answered on it. */
  served: number;
  /** When its last answer finished. */
  lastAt: number;
  /** Listens for the close of each of its answers: one function per connection, not per request. */
  readonly answered: (this: ServerResponse) => void;
}

/** Follows `server`'s connections from now on; `close` stops accepting and resolves once all are gone. */
export function followConnections(server: Server | HttpsServer): { close(timeoutMs: number, logger: Logger): Promise<void> } {
  const connections = new Map<Socket, ConnectionState>();
  let closing = false;
  // With TLS, requests arrive on the TLS socket, made once the handshake is done: follow that one.
  server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    const state: ConnectionState = {
      open: new Set(),
      served: 0,
      lastAt: Date.now(),
      answered(this: ServerResponse) {
        if (!state.open.delete(this)) return;
        state.served += 1;
        state.lastAt = Date.now();
      },
    };
    connections.set(socket, state);
    socket.once('close', () => connections.delete(socket));
  });
  const onRequest = (request: IncomingMessage, response: ServerResponse): void => {
    const state = connections.get(request.socket);
    if (closing) response.shouldKeepAlive = false;
    if (state === undefined) return;
    state.open.add(response);
    // A response emits 'close' once, after 'finish' or when its connection ends first.
    response.on('close', state.answered);
  };
  server.prependListener('request', onRequest);
  server.prependListener('checkContinue', onRequest);

  const close = (timeoutMs: number, logger: Logger): Promise<void> =>
    new Promise<void>((resolve) => {
      closing = true;
      const began = Date.now();
      for (const state of connections.values()) for (const response of state.open) if (!response.headersSent) response.shouldKeepAlive = false;
      const sweep = (): void => {
        const now = Date.now();
        for (const [socket, state] of connections) {
          if (state.open.size > 0) continue;
          if (state.served > 0 ? now - state.lastAt >= QUIET_MS : now - began >= FRESH_GRACE_MS) socket.destroy();
        }
      };
      const sweeper = setInterval(sweep, SWEEP_MS);
      const force = setTimeout(() => {
        logger.warn({ shutdownTimeoutMs: timeoutMs, connections: connections.size }, 'HTTP requests still running at the shutdown timeout; closing their connections');
        for (const socket of connections.keys()) socket.destroy();
      }, timeoutMs);
      // net's close: stop accepting, and call back once the last connection is gone.
      NetServer.prototype.close.call(server, () => {
        clearInterval(sweeper);
        clearTimeout(force);
        // node:http's own close now finds nothing to destroy, and stops its timeout checks.
        server.close();
        resolve();
      });
      sweep();
    });
  return { close };
}

/**
 * Closes a connection that sends no byte within `timeoutMs` of being accepted, without an answer.
 * node:http's headers timeout does not reliably cover a connection on which no request has begun
 * (on Node 20 some stay open for good), so without this a client can hold descriptors by
 * connecting and staying silent. One timer per connection, dropped at close;
 * a connection that has sent anything is left to the headers, request and keep-alive timeouts.
 */
export function closeSilentConnections(server: NetServer, timeoutMs: number): void {
  server.on('connection', (socket: Socket) => {
    const timer = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, timeoutMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
  // node:http's own check does cover some silent connections, and on a busy machine it can come
  // before the timer above: it would answer them 408. They are closed unanswered here too.
  if (server instanceof HttpServer || server instanceof HttpsServer) server.on('clientError', answerClientError);
}

/** node:http's answers to a client's error, by its code (node's `socketOnError`); 400 for the rest. */
const CLIENT_ERROR_ANSWERS: ReadonlyMap<string | undefined, string> = new Map([
  ['HPE_HEADER_OVERFLOW', closingAnswer(431)],
  ['HPE_CHUNK_EXTENSIONS_OVERFLOW', closingAnswer(413)],
  ['ERR_HTTP_REQUEST_TIMEOUT', closingAnswer(408)],
]);
const BAD_REQUEST = closingAnswer(400);

function closingAnswer(status: number): string {
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`;
}

/**
 * What node:http does with a client's error when nothing listens for it (an answer by the error's
 * code unless one is already under way, then the connection destroyed), except to a connection
 * that never sent a byte: it asked nothing, so it gets no answer.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // `_httpMessage`: the response in flight on the socket (node's own check; no public equivalent).
  const answering = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
  if ((socket as Socket).bytesRead > 0 && socket.writable && answering?.headersSent !== true) {
    socket.write(CLIENT_ERROR_ANSWERS.get(error.code) ?? BAD_REQUEST);
  }
  socket.destroy(error);
}
