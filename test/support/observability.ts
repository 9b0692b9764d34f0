/**
 * Where tests reach the observability endpoints (/metrics, /dashboard, /v1/events: the admin
 * listener) and the decision endpoints, and a reader of the Prometheus text format.
 */
import { get } from 'node:http';
import { expect } from 'vitest';

/** A running service: in this process (`startService`) or a `tollgate serve` child process. */
export type AnyService = { readonly httpPort: number | undefined; readonly adminPort: number };

/** The URL of `path` (e.g. `/metrics`, or an admin endpoint) on the listener that serves the observability and admin endpoints. */
export function observabilityUrl(service: AnyService, path: string): string {
  return `http://127.0.0.1:${service.adminPort}${path}`;
}

/** The URL of `path` on the listener that answers decisions (`/json`, `/v1/check`, `/v1/limit`). */
export function decisionUrl(service: AnyService, path: string): string {
  if (service.httpPort === undefined) throw new Error('this service has no decision listener');
  return `http://127.0.0.1:${service.httpPort}${path}`;
}

/** POSTs `body` as JSON to `url`; resolves with the status (the body is read and dropped). */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<number> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  await response.arrayBuffer();
  return response.status;
}

export interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** Parses the Prometheus text format (enough of it for these tests). */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) throw new Error(`unparsable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/**
 * GET `path` on a connection of its own (as a Prometheus scrape: with workers, whichever worker
 * the connection lands on answers; a pooled connection could belong to a worker since killed).
 */
export function getFresh(service: AnyService, path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    get(observabilityUrl(service, path), { agent: false, headers }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
    }).on('error', reject);
  });
}

/** GET /metrics (with `query`, e.g. `?by=worker`), expecting 200; the text and its samples. */
export async function scrapeMetrics(service: AnyService, query = ''): Promise<{ text: string; samples: Sample[] }> {
  const { status, text } = await getFresh(service, `/metrics${query}`);
  expect(status, text).toBe(200);
  return { text, samples: parseMetrics(text) };
}

/** Sum of the samples named `name` whose labels include `labels` (0 when none). */
export function sampleSum(samples: readonly Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/**
 * The first `snapshot` event of GET /v1/events that `accept` takes, parsed (on a connection of its
 * own, closed after it); rejects after `timeoutMs`.
 */
export function firstSnapshot(service: AnyService, accept: (snapshot: Record<string, unknown>) => boolean = () => true, timeoutMs = 10_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const request = get(observabilityUrl(service, '/v1/events'), { agent: false }, (response) => {
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        buffer += chunk;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!block.startsWith('event: snapshot\n')) continue;
          const snapshot = JSON.parse(block.slice(block.indexOf('data: ') + 6)) as Record<string, unknown>;
          if (accept(snapshot)) return finish(undefined, snapshot);
        }
      });
      response.on('end', () => finish(new Error('the event stream ended before a snapshot')));
    });
    const timer = setTimeout(() => finish(new Error(`no snapshot accepted within ${timeoutMs} ms; last data: ${buffer.slice(-500)}`)), timeoutMs);
    const finish = (error: Error | undefined, snapshot?: Record<string, unknown>): void => {
      clearTimeout(timer);
      request.destroy();
      if (error !== undefined) reject(error);
      else resolve(snapshot!);
    };
    request.on('error', (error) => finish(error));
  });
}
