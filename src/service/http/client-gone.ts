/**
 * Requests their clients ended: an upload aborted, a connection reset, a write to a closed socket,
 * a client timing out. They are the network's weather, not the service's failures, and a client
 * can cause as many as it likes: each was an error line with its stack (5,000 aborted uploads
 * wrote 5,000 of them). Each is now a debug line, and they are summarised as the audit log's
 * failed logins are: one info line per {@link SUMMARY_INTERVAL_MS} with their count by code.
 */
import type { Logger } from 'pino';

/** How often the count of requests their clients ended is written (when there were any). */
export const SUMMARY_INTERVAL_MS = 10_000;

/** Error codes of a request its client ended, as node reports them. */
const CLIENT_GONE_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ETIMEDOUT', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED', 'ERR_HTTP_REQUEST_TIMEOUT']);

/** The code under which `error` is counted when its client ended the request, else undefined (a failure of the service). */
export function clientGoneCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && CLIENT_GONE_CODES.has(code)) return code;
  // node's IncomingMessage says `aborted` (code ECONNRESET on Node 20; none on some versions).
  return message === 'aborted' ? 'ECONNRESET' : undefined;
}

/** Counts requests their clients ended and writes the count once per interval. */
export class ClientGoneSummary {
  private counts = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs = SUMMARY_INTERVAL_MS,
  ) {}

  /** One request ended by its client (`code` from {@link clientGoneCode}), on `path`. */
  count(code: string, path: string): void {
    this.logger.debug({ code, path }, 'request ended by its client');
    this.counts.set(code, (this.counts.get(code) ?? 0) + 1);
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => this.flush(), this.intervalMs);
    this.timer.unref();
  }

  /** Writes the pending count now (at shutdown too), if any. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.counts.size === 0) return;
    const byCode = Object.fromEntries(this.counts);
    const total = [...this.counts.values()].reduce((sum, n) => sum + n, 0);
    this.counts = new Map();
    this.logger.info({ clientGone: total, byCode }, `${total} requests ended by their clients (aborted uploads, resets) in the last ${this.intervalMs / 1_000} s or less`);
  }
}
