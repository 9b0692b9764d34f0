/** Small answers the gateway writes itself (its own JSON errors, 429s, 202s), never the upstream's. */
import type { ServerResponse } from 'node:http';
import type { HeaderList } from '../http/report.js';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: HeaderList = []): void {
  sendText(res, status, 'application/json; charset=utf-8', JSON.stringify(body), headers);
}

/** Writes a whole answer, unless one began or the client left. */
export function sendText(res: ServerResponse, status: number, contentType: string, text: string, headers: HeaderList): void {
  if (res.headersSent || res.destroyed) return;
  const flat: string[] = [];
  for (const [name, value] of headers) flat.push(name, value);
  flat.push('content-type', contentType, 'content-length', String(Buffer.byteLength(text)));
  res.writeHead(status, flat);
  res.end(text);
}
