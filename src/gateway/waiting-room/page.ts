/**
 * The waiting page: a template with `{{placeholders}}` (the built-in page, or `template: FILE`),
 * every inserted value HTML-escaped; and its JSON form for single-page apps. The page refreshes
 * itself twice over: a `Refresh` header and, in the built-in page, a meta refresh; no script.
 */
import type { ServerResponse } from 'node:http';
import type { HeaderList } from '../../http/report.js';
import { sendJson, sendText } from '../reply.js';

/** The placeholders a template may use. */
export const TEMPLATE_FIELDS = ['position', 'queue_length', 'wait', 'wait_seconds', 'refresh_seconds', 'room'] as const;
type Field = (typeof TEMPLATE_FIELDS)[number];

/** A compiled template: literal text and placeholders, alternating. */
export interface PageTemplate {
  readonly parts: readonly (string | { readonly field: Field })[];
}

/** What the page shows. */
export interface WaitingView {
  readonly room: string;
  /** 1 for the head of the queue. */
  readonly position: number;
  readonly queueLength: number;
  readonly waitMs: number;
  readonly refreshMs: number;
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_]+)\s*\}\}/g;

/** Compiles `text`, or says what is wrong with it (an unknown placeholder). */
export function compileTemplate(text: string): PageTemplate | string {
  const parts: PageTemplate['parts'][number][] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    const name = match[1]!;
    if (!(TEMPLATE_FIELDS as readonly string[]).includes(name)) return `unknown placeholder {{${name}}}`;
    parts.push(text.slice(last, match.index), { field: name as Field });
    last = match.index! + match[0].length;
  }
  parts.push(text.slice(last));
  return { parts };
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** `text` safe inside HTML text and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** A wait in words: "less than a minute", "about 1 minute", "about 12 minutes", "about 2 hours". */
export function waitInWords(ms: number): string {
  const minutes = Math.ceil(ms / 60_000);
  if (ms < 60_000) return 'less than a minute';
  if (minutes < 120) return `about ${minutes} minute${minutes === 1 ? '' : 's'}`;
  return `about ${Math.round(minutes / 60)} hours`;
}

/** The page for `view`, every value escaped. */
export function renderPage(template: PageTemplate, view: WaitingView): string {
  const values: Record<Field, string> = {
    position: String(view.position),
    queue_length: String(view.queueLength),
    wait: waitInWords(view.waitMs),
    wait_seconds: String(Math.ceil(view.waitMs / 1000)),
    refresh_seconds: String(Math.ceil(view.refreshMs / 1000)),
    room: view.room,
  };
  return template.parts.map((part) => (typeof part === 'string' ? part : escapeHtml(values[part.field]))).join('');
}

/** Inline styles only (a template's own), images from anywhere; no script, no frames, no forms. */
const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * Answers a waiting client: 503 with `Retry-After` (the page stands in for the site for a while:
 * crawlers and caches must not take it for the content), `Cache-Control: no-store`, and the page,
 * or its JSON form when the client asks for JSON.
 */
export function sendWaiting(res: ServerResponse, method: string, accept: string | undefined, template: PageTemplate, view: WaitingView, headers: HeaderList): void {
  const retryAfter = Math.ceil(view.refreshMs / 1000);
  const common: HeaderList = [...headers, ['cache-control', 'no-store'], ['retry-after', String(retryAfter)], ['x-tollgate-waiting-room', view.room]];
  if (accept !== undefined && /application\/json/i.test(accept) && !/text\/html/i.test(accept)) {
    const body = { error: 'waiting_room', message: `you are number ${view.position} in the queue; ask again in ${retryAfter} s (keep the cookie: it holds your place)`, position: view.position, queueLength: view.queueLength, estimatedWaitSeconds: Math.ceil(view.waitMs / 1000), retryAfter };
    if (method === 'HEAD') sendText(res, 503, 'application/json; charset=utf-8', '', common);
    else sendJson(res, 503, body, common);
    return;
  }
  const html = renderPage(template, view);
  const page: HeaderList = [...common, ['refresh', String(retryAfter)], ['content-security-policy', PAGE_CSP], ['x-content-type-options', 'nosniff'], ['referrer-policy', 'no-referrer']];
  sendText(res, 503, 'text/html; charset=utf-8', method === 'HEAD' ? '' : html, page);
}

/** The built-in page: plain, readable, no outside resources. */
export const DEFAULT_TEMPLATE = compileTemplate(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="{{refresh_seconds}}">
<meta name="robots" content="noindex">
<title>You are in the queue</title>
<style>
  body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; background: #f4f5f7; color: #1f2328; display: flex; min-height: 100vh; align-items: center; justify-content: center; }
  main { background: #fff; border-radius: 12px; box-shadow: 0 2px 12px rgba(0,0,0,.08); padding: 2.5rem 3rem; max-width: 28rem; text-align: center; }
  h1 { font-size: 1.4rem; margin: 0 0 .5rem; }
  .position { font-size: 3.5rem; font-weight: 700; color: #0b5cad; margin: 1rem 0 0; }
  .label { color: #57606a; margin: 0 0 1.2rem; }
  .wait { font-size: 1.1rem; margin: 0 0 1.2rem; }
  .note { color: #57606a; font-size: .9rem; margin: 0; }
</style>
</head>
<body>
<main>
  <h1>You are in the queue</h1>
  <p>The site is busy. We keep your place and let you in as soon as it is your turn.</p>
  <p class="position" id="position">{{position}}</p>
  <p class="label">your place in the queue (of {{queue_length}})</p>
  <p class="wait">Estimated wait: <strong id="wait">{{wait}}</strong></p>
  <p class="note">Keep this page open: it refreshes itself every {{refresh_seconds}} s and lets you in when it is your turn. Reloading it yourself does not lose your place.</p>
</main>
</body>
</html>
`) as PageTemplate;
