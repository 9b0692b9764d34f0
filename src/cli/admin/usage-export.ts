/**
 * `tollgate usage export --period 2026-11 [--format csv|jsonl] [--time-zone Z] [--output FILE]`:
 * the usage ledger of one period (docs/quotas.md §3) from the admin listener's
 * `GET /v1/usage/export`, streamed to stdout or to FILE as it arrives. FILE is written beside
 * itself (`FILE.partial`) and renamed when the export is complete, so a cut export never leaves a
 * file that looks whole.
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { AdminApiError, InvalidOptionError } from '../../errors.js';
import { answerError, networkProblem, parseBody, requireToken, type Connection } from './connection.js';
import type { CommandOutput } from './output.js';

export const USAGE_EXPORT_FLAGS = {
  period: { type: 'string' },
  format: { type: 'string' },
  'time-zone': { type: 'string' },
  output: { type: 'string', short: 'o' },
} as const;

export const USAGE_EXPORT_HELP = `Usage: tollgate usage export --period P [--format jsonl|csv] [--time-zone Z] [--output FILE]

The usage ledger of one period (limits whose descriptor has ledger:), from the running service's
admin listener (GET /v1/usage/export), streamed as it is read: one row per key, with what was
admitted (and refused, where the ledger counts refusals).
  --period P       2026 (year), 2026-Q4, 2026-11 (month), 2026-W48 (ISO week), 2026-11-28 (day)
  --format F       jsonl (the default: one JSON object a line) or csv (with a header line)
  --time-zone Z    the ledger's time zone, e.g. Europe/Paris (default UTC)
  --output FILE    write to FILE (renamed into place once complete) instead of stdout
Exit codes: 0 done, 2 bad flags, 3 service unreachable, answering an error, or cutting the export.
`;

const PERIOD = /^\d{4}(-Q[1-4]|-W\d{2}|-\d{2}(-\d{2})?)?$/;

/** Streams the export the flags ask for; resolves with the exit code. */
export async function runUsageExport(connection: Connection, values: Record<string, unknown>, output: CommandOutput): Promise<number> {
  const period = values.period as string | undefined;
  if (period === undefined || !PERIOD.test(period)) throw new InvalidOptionError(`usage export needs --period P, one of 2026, 2026-Q4, 2026-11, 2026-W48, 2026-11-28; got ${period === undefined ? 'none' : JSON.stringify(period)}`);
  const format = (values.format as string | undefined) ?? 'jsonl';
  if (format !== 'jsonl' && format !== 'csv') throw new InvalidOptionError(`--format must be jsonl or csv, got ${JSON.stringify(format)}`);
  requireToken(connection);
  const query = new URLSearchParams({ period, format });
  if (values['time-zone'] !== undefined) query.set('time_zone', values['time-zone'] as string);
  const file = values.output as string | undefined;
  const body = await open(connection, `/v1/usage/export?${query.toString()}`);
  if (file === undefined) {
    await copy(body, (text) => output.stdout(text), connection);
    return 0;
  }
  const partial = `${file}.partial`;
  const sink = createWriteStream(partial);
  try {
    await copy(body, async (text) => {
      if (!sink.write(text)) await once(sink, 'drain');
    }, connection);
    sink.end();
    await once(sink, 'finish');
    await rename(partial, file);
  } catch (error) {
    sink.destroy();
    await rm(partial, { force: true });
    throw error;
  }
  return 0;
}

/** The export's body once its status says it comes; the timeout covers the wait for that status only. */
async function open(connection: Connection, path: string): Promise<ReadableStream<Uint8Array>> {
  const aborter = new AbortController();
  const timer = setTimeout(() => aborter.abort(new DOMException('timed out', 'TimeoutError')), connection.timeoutMs);
  let response: Response;
  try {
    response = await fetch(`${connection.url}${path}`, { headers: { authorization: `Bearer ${connection.token!}` }, signal: aborter.signal });
  } catch (error) {
    throw new AdminApiError(`cannot reach the service at ${connection.url}: ${networkProblem(error, connection.timeoutMs)}; is \`tollgate serve\` running there? (set --url, or TOLLGATE_ADMIN_URL)`);
  } finally {
    clearTimeout(timer);
  }
  if (response.status !== 200 || response.body === null) throw answerError(connection, 'GET /v1/usage/export', response.status, parseBody(await response.text(), response.headers.get('content-type')));
  return response.body;
}

async function copy(body: ReadableStream<Uint8Array>, write: (text: string) => unknown, connection: Connection): Promise<void> {
  const decoder = new TextDecoder();
  try {
    for await (const chunk of body) await write(decoder.decode(chunk, { stream: true }));
  } catch (error) {
    throw new AdminApiError(`the service at ${connection.url} cut the export before its end (${(error as Error).message}); nothing complete was written — run it again`);
  }
}
