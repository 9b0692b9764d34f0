/**
 * `GET /v1/usage/export?period=2026-11&format=jsonl|csv[&time_zone=Europe/Paris]` on the admin
 * listener: the usage ledger of one period (docs/quotas.md §3), streamed row by row as the
 * limiter reads it from the store in pages, never the whole period in memory; the client's
 * backpressure is honoured. Behind the admin token, like `GET /v1/usage`. A store failure before
 * the first row is a 503; after it the connection is cut, so a partial export never looks complete
 * (a JSON Lines export that is complete ends with a newline; a cut one has no `0\r\n\r\n` chunk).
 */
import type { ServerResponse } from 'node:http';
import type { LedgerRow } from '../../limiter/index.js';
import { TollgateError } from '../../errors.js';
import { adminRoute } from './auth.js';
import type { ServiceContext } from '../context.js';
import type { HttpRoutes } from '../http/listener.js';
import { HttpError } from '../http/body.js';

const EXAMPLE = '?period=2026-11&format=csv (format jsonl or csv; time_zone optional, default UTC)';
const FORMATS = ['jsonl', 'csv'] as const;
const PARAMETERS = new Set(['period', 'format', 'time_zone']);
export const CSV_HEADER = 'key,period,periodStart,periodEnd,admitted,refused\n';

/** A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** One row as a line of `format`. */
export function ledgerLine(row: LedgerRow, format: 'jsonl' | 'csv'): string {
  if (format === 'jsonl') return `${JSON.stringify(row)}\n`;
  return `${csvField(row.key)},${row.period},${row.periodStart},${row.periodEnd},${row.admitted},${row.refused}\n`;
}

/** Adds `GET /v1/usage/export` to the admin listener's table. */
export function addLedgerRoute(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/usage/export', adminRoute(ctx, undefined, async (_request, response, url) => {
    const query = url().searchParams;
    const unknown = [...query.keys()].find((name) => !PARAMETERS.has(name));
    if (unknown !== undefined) throw new HttpError(400, `unknown query parameter ${JSON.stringify(unknown)}; the parameters are period, format and time_zone: ${EXAMPLE}`);
    const period = query.get('period');
    if (period === null || period === '') throw new HttpError(400, `give the period to export: ${EXAMPLE}`);
    const format = query.get('format') ?? 'jsonl';
    if (!(FORMATS as readonly string[]).includes(format)) throw new HttpError(400, `format ${JSON.stringify(format)} is not one of jsonl, csv: ${EXAMPLE}`);
    const zone = query.get('time_zone');
    let rows: AsyncIterator<LedgerRow>;
    try {
      rows = ctx.limiter.ledger.export({ period, ...(zone === null ? {} : { timeZone: zone }) })[Symbol.asyncIterator]();
    } catch (error) {
      throw error instanceof TollgateError ? new HttpError(400, `${error.message.replace(/^ledger\.export: /, '')}: ${EXAMPLE}`) : error;
    }
    await stream(response, rows, format as 'jsonl' | 'csv');
  }), 'admin');
}

async function stream(response: ServerResponse, rows: AsyncIterator<LedgerRow>, format: 'jsonl' | 'csv'): Promise<void> {
  // The first page is read before the status is sent: a store that cannot answer is a 503 (errorReply).
  let next = await rows.next();
  response.writeHead(200, { 'content-type': format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson', 'cache-control': 'no-store' });
  if (format === 'csv') response.write(CSV_HEADER);
  try {
    while (next.done !== true) {
      if (!response.write(ledgerLine(next.value, format))) await drained(response);
      if (response.destroyed) return;
      next = await rows.next();
    }
  } catch {
    // Past the status line: cut the connection, so the client sees an incomplete export as such.
    response.destroy();
    return;
  }
  response.end();
}

function drained(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}
