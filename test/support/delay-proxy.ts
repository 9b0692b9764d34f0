/**
 * A TCP proxy that delays every byte by a fixed time in each direction: the link between two
 * regions, for tests. Order is kept (a queue per direction); `cut()` drops every connection and
 * refuses new ones until `restore()`, as a broken inter-region link would.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface DelayProxy {
  readonly port: number;
  readonly url: string;
  /** Drops every connection and refuses new ones. */
  cut(): void;
  /** Accepts connections again. */
  restore(): void;
  /** Delays by `delayMs` what arrives from now on, each direction (a link that starts to lag; `cut()` then drops it). */
  lag(delayMs: number): void;
  close(): Promise<void>;
}

/** Forwards `write` to `to` `delayMs()` after each chunk arrived, in order. */
function delayed(from: Socket, to: Socket, delayMs: () => number): void {
  const queue: { due: number; chunk: Buffer }[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    timer = undefined;
    const now = Date.now();
    while (queue.length > 0 && queue[0]!.due <= now) to.write(queue.shift()!.chunk);
    if (queue.length > 0) timer = setTimeout(flush, queue[0]!.due - now);
  };
  from.on('data', (chunk: Buffer) => {
    queue.push({ due: Date.now() + delayMs(), chunk });
    timer ??= setTimeout(flush, queue[0]!.due - Date.now());
  });
  from.on('close', () => {
    clearTimeout(timer);
    to.destroy();
  });
}

/** Starts a proxy on a free port to 127.0.0.1:`targetPort`, delaying each direction by `delayMs`. */
export async function startDelayProxy(targetPort: number, delayMs: number): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  let down = false;
  const server: Server = createServer((client) => {
    if (down) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => sockets.delete(socket));
    }
    delayed(client, upstream, () => delayMs);
    delayed(upstream, client, () => delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const dropAll = (): void => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    cut() {
      down = true;
      dropAll();
    },
    restore() {
      down = false;
    },
    lag(ms) {
      delayMs = ms;
    },
    close() {
      dropAll();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
