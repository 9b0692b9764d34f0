/**
 * A pino logger whose JSON lines a test reads back: wait for a log line instead of for time.
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';

/** A logger at `level` and the lines it wrote, parsed, in order. */
export function capturedLogger(level = 'info'): { logger: Logger; logs: Record<string, unknown>[] } {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), logs };
}
