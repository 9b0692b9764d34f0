/**
 * Closes client connections that have been silent too long (envoy's stream idle timeout): nothing
 * read from the client and nothing written to it. A sweep over the open connections, a few times
 * per idle period, instead of node's `server.timeout`: that one re-arms a timer on the socket twice
 * per request (a `Timeout` and a bound function each time) and refreshes it on every read and
 * write, about a tenth of the gateway's CPU per request under load (BENCHMARKS.md, "Gateway: the
 * floor under it"). A connection is closed after between `idleMs` and 1.25 × `idleMs` of silence.
 */
import type { Server } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';

/** How many sweeps make up one idle period. */
const SWEEPS_PER_PERIOD = 4;

interface Activity {
  /** Bytes read from and written to the socket at the last sweep. */
  bytes: number;
  /** Sweeps in a row that saw no byte move. */
  quiet: number;
}

/** Follows `server`'s connections and destroys each one silent for `idleMs`, until the server closes. */
export function closeIdleConnections(server: Server | HttpsServer, idleMs: number): void {
  const connections = new Map<Socket, Activity>();
  // The TCP socket also under TLS: its bytes (encrypted) move whenever the client's do.
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { bytes: 0, quiet: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  const sweep = (): void => {
    for (const [socket, activity] of connections) {
      const bytes = socket.bytesRead + socket.bytesWritten;
      if (bytes !== activity.bytes) {
        activity.bytes = bytes;
        activity.quiet = 0;
      } else if (++activity.quiet >= SWEEPS_PER_PERIOD) {
        socket.destroy();
      }
    }
  };
  const timer = setInterval(sweep, Math.max(1, Math.floor(idleMs / SWEEPS_PER_PERIOD)));
  timer.unref();
  server.once('close', () => clearInterval(timer));
}
