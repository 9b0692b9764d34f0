/** Raw TCP connections for tests about what a server does with connections (timeouts, caps). */
import { connect, type Socket } from 'node:net';

/** Resolves with how long after `since` the server closed `socket`, and what it sent. */
export function closedBy(socket: Socket, since: number): Promise<{ afterMs: number; received: string }> {
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
  socket.on('error', () => undefined);
  return new Promise((resolve) => socket.once('close', () => resolve({ afterMs: Date.now() - since, received })));
}

export function opened(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}
