/**
 * `rateLimit()` for node:http, Express and Connect: a `(req, res, next)` middleware, plus
 * `handle(req, res)` for a plain node:http server.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidOptionError, describeValue } from '../errors.js';
import { HttpRateLimiter, NodeRequestView, type CoreOptions } from './core.js';
import { UNAVAILABLE_BODY, type HeaderList, type LimitedInfo } from './report.js';
import { applyVerdict, type Verdict, type VerdictActions } from './verdict.js';
import { sendWithHead } from './head-headers.js';

export interface RateLimitOptions<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse> extends CoreOptions<Req> {
  /** Answers a throttled request instead of Tollgate's 429 (the rate-limit headers are already set). */
  readonly onLimited?: (req: Req, res: Res, info: LimitedInfo) => void;
}

/** One request as node's middleware handles it. */
interface NodeExchange<Req, Res> {
  readonly req: Req;
  readonly res: Res;
  readonly next: () => void;
}

export interface RateLimitMiddleware<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse> {
  /** Express / Connect middleware: calls `next()` when the request may go on, answers 429 otherwise. */
  (req: Req, res: Res, next: (error?: unknown) => void): void;
  /** For a plain node:http handler: resolves true when the request may go on, false when it was answered. */
  handle(req: Req, res: Res): Promise<boolean>;
  /** The validated configuration and its store. */
  readonly limiter: HttpRateLimiter<Req>;
  /** Closes the store if the middleware created it. */
  close(): Promise<void>;
}

/**
 * Rate limits node:http / Express / Connect requests.
 *
 * ```ts
 * app.use(rateLimit({ policy: { algorithm: 'sliding-window', limit: 100, window: '1m' } }));
 * ```
 */
export function rateLimit<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: RateLimitOptions<Req, Res>,
): RateLimitMiddleware<Req, Res> {
  const limiter = new HttpRateLimiter<Req>(options, ['onLimited']);
  const onLimited = options.onLimited;
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw new InvalidOptionError(`onLimited must be a function (req, res, info) => void, got ${describeValue(onLimited)}`);
  }

  const decide = (req: Req): ReturnType<HttpRateLimiter<Req>['decide']> =>
    limiter.decide(req, new NodeRequestView(limiter, req));

  const actions = nodeActions<Req, Res>(onLimited);
  const apply = (req: Req, res: Res, verdict: Verdict, next: () => void): boolean => {
    // With `settle`: an admitted request's reservation is settled once its response is done.
    limiter.settler?.settleAfter(req, res);
    return applyVerdict(limiter, verdict, { req, res, next }, actions);
  };

  /** Decides `req`: `next()` when it may go on (now or after shaping), `answered()` when it was answered. */
  const run = (req: Req, res: Res, next: (error?: unknown) => void, answered: () => void): void => {
    let verdict: ReturnType<typeof decide>;
    const go = onward(limiter, req, res, next, answered);
    try {
      verdict = decide(req);
    } catch (error) {
      next(error);
      return;
    }
    // A request `skip` let through takes no slot either.
    if (verdict instanceof Promise) {
      verdict.then((resolved) => {
        const then = resolved.skipped === true ? next : go;
        if (apply(req, res, resolved, then)) then();
        else answered();
      }, next);
      return;
    }
    const then = verdict.skipped === true ? next : go;
    if (apply(req, res, verdict, then)) then();
    else answered();
  };
  const nothing = (): void => {};

  const middleware = ((req: Req, res: Res, next: (error?: unknown) => void): void => run(req, res, next, nothing)) as RateLimitMiddleware<Req, Res>;
  middleware.handle = (req, res) =>
    new Promise<boolean>((resolve, reject) => {
      run(req, res, (error?: unknown) => (error === undefined ? resolve(true) : reject(error)), () => {
        // Held for shaping: apply() calls next() later. Otherwise the response is answered.
        if (res.headersSent || res.writableEnded || res.destroyed) resolve(false);
        else res.once('finish', () => resolve(false)).once('close', () => resolve(false));
      });
    });
  Object.defineProperty(middleware, 'limiter', { value: limiter });
  middleware.close = () => limiter.close();
  return middleware;
}

/** What follows once the rate limits admit `req`: with `concurrency`, a slot first (concurrency.ts). */
function onward<Req extends IncomingMessage, Res extends ServerResponse>(limiter: HttpRateLimiter<Req>, req: Req, res: Res, next: (error?: unknown) => void, answered: () => void): () => void {
  const slots = limiter.slots;
  if (slots === undefined) return next;
  return () =>
    void slots.hold(req, new NodeRequestView(limiter, req), res).then((refused) => {
      if (refused === undefined) return next();
      answer(req, res, refused.status, 'application/json; charset=utf-8', refused.body, refused.headers);
      answered();
    }, next);
}

/** node's side of a verdict; each answers whether the request may go on now (false: answered, or held). */
function nodeActions<Req extends IncomingMessage, Res extends ServerResponse>(
  onLimited: RateLimitOptions<Req, Res>['onLimited'],
): VerdictActions<NodeExchange<Req, Res>, boolean> {
  return {
    reportsHolder: (x) => x.req,
    accept: (x) => x.req.headers.accept,
    unavailable: (x, headers) => {
      answer(x.req, x.res, 503, 'application/json; charset=utf-8', UNAVAILABLE_BODY, headers);
      return false;
    },
    skip: () => true,
    admit: ({ res, next }, headers, delayMs) => {
      sendWithHead(res, headers);
      if (delayMs === 0) return true;
      // Shaping: the request waits its turn; a client that left is not served.
      setTimeout(() => {
        if (!res.destroyed && !res.writableEnded) next();
      }, delayMs);
      return false;
    },
    refuse: ({ req, res }, headers, info) => {
      if (onLimited !== undefined) {
        setHeaders(res, headers);
        onLimited(req, res, info);
      } else {
        answer(req, res, 429, info.body.contentType, info.body.text, headers);
      }
      return false;
    },
  };
}

/**
 * Sets `headers` unless the response has started. setHeader itself refuses once it has (it reads the
 * same flag), so no `headersSent` check first: on Express's responses every read of it costs V8 a
 * runtime lookup.
 */
function setHeaders(res: ServerResponse, headers: HeaderList): void {
  try {
    for (let i = 0; i < headers.length; i++) res.setHeader(headers[i]![0], headers[i]![1]);
  } catch (error) {
    if ((error as { code?: string }).code !== 'ERR_HTTP_HEADERS_SENT') throw error;
  }
}

function answer(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  contentType: string,
  text: string,
  headers: ReadonlyArray<readonly [string, string]>,
): void {
  if (res.headersSent) {
    // Someone already started the response; all we can do is stop it going further.
    res.end();
    return;
  }
  // One flat array to writeHead: node's fast path when no header was set before (setHeader each
  // costs a validation and a map entry).
  const flat: string[] = [];
  for (const [name, value] of headers) flat.push(name, value);
  flat.push('content-type', contentType, 'content-length', String(Buffer.byteLength(text)));
  res.writeHead(status, flat);
  res.end(req.method === 'HEAD' ? undefined : text);
}
