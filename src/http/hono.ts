/**
 * Hono: `app.use(rateLimiter(options))`, or on one route. Runs on any runtime Hono runs on; the
 * client address comes from `remoteAddress(c)`, which by default reads what @hono/node-server and
 * Bun expose.
 */
import type { Context, MiddlewareHandler, Next } from 'hono';
import { InvalidOptionError, describeValue } from '../errors.js';
import { HttpRateLimiter, LazyRequestView, type CoreOptions } from './core.js';
import { UNAVAILABLE_BODY, type HeaderList, type LimitedInfo } from './report.js';
import type { ClosingResponse, SettleHook } from './settle.js';
import { applyVerdict, type Verdict, type VerdictActions } from './verdict.js';
import { sendWithHead, type HeadResponse } from './head-headers.js';

/** One request as the middleware handles it. */
interface HonoExchange {
  readonly c: Context;
  readonly next: Next;
}

export interface HonoRateLimitOptions extends CoreOptions<Context> {
  /** Answers a throttled request instead of Tollgate's 429 (the rate-limit headers are already set on `c`). */
  readonly onLimited?: (c: Context, info: LimitedInfo) => Response | Promise<Response>;
  /** The socket peer's address (default: @hono/node-server's `c.env.incoming`, or Bun's `c.env.requestIP`). */
  readonly remoteAddress?: (c: Context) => string | undefined;
  /**
   * Cost known after the response (docs/http.md): `cost` is reserved as the estimate, this says what
   * the request took, given the context and its final `c.res`, once the response is done (on
   * @hono/node-server node's 'close'; elsewhere once the handlers have returned).
   */
  readonly settle?: SettleHook<Context, Response>;
}

export type HonoRateLimitMiddleware = MiddlewareHandler & { readonly limiter: HttpRateLimiter<Context> };

interface RuntimeEnv {
  incoming?: { socket?: { remoteAddress?: string } };
  /** @hono/node-server's ServerResponse. */
  outgoing?: Partial<HeadResponse> & { headersSent?: boolean; once?: ClosingResponse['once'] };
  requestIP?: (request: Request) => { address?: string } | null;
}

function defaultRemoteAddress(c: Context): string | undefined {
  const env = c.env as RuntimeEnv | undefined;
  if (env === undefined || env === null) return undefined;
  return env.incoming?.socket?.remoteAddress ?? (typeof env.requestIP === 'function' ? env.requestIP(c.req.raw)?.address : undefined);
}

class HonoRequestView extends LazyRequestView {
  constructor(
    limiter: HttpRateLimiter<Context>,
    private readonly c: Context,
    remoteAddress: string | undefined,
  ) {
    super(limiter, remoteAddress);
  }

  get method(): string {
    return this.c.req.method;
  }

  get path(): string {
    return this.c.req.path;
  }

  protected readHeader(name: string): string | undefined {
    return this.c.req.raw.headers.get(name) ?? undefined;
  }
}

/**
 * Sets `headers` for the response; on @hono/node-server straight onto node's response (c.header(),
 * or reading c.res.headers, takes node-server off its fast path for c.text()), sent with the head it
 * writes (head-headers.ts). Returns whether they went there directly.
 */
function setHeaders(c: Context, headers: HeaderList): boolean {
  const outgoing = (c.env as RuntimeEnv | undefined)?.outgoing;
  const direct = typeof outgoing?.writeHead === 'function' && typeof outgoing.getHeaderNames === 'function' && typeof outgoing.hasHeader === 'function' && typeof outgoing.setHeader === 'function' && outgoing.headersSent !== true;
  if (direct) sendWithHead(outgoing as HeadResponse, headers);
  else for (const [name, value] of headers) c.header(name, value);
  return direct;
}

function addHeaders(c: Context, headers: HeaderList): void {
  try {
    for (const [name, value] of headers) c.res.headers.set(name, value);
  } catch {
    // Immutable headers (a fetched Response): copy the response.
    const copy = new Response(c.res.body, c.res);
    for (const [name, value] of headers) copy.headers.set(name, value);
    c.res = copy;
  }
}

/**
 * When `c`'s response is done: on @hono/node-server node's response 'close' (finished, or the
 * client gone); on other runtimes, which say nothing of the body's end, once the middleware's
 * `answer` (the handlers after it) has settled.
 */
function responseDone(c: Context, answer: Promise<void | Response> | Response): ClosingResponse {
  const outgoing = (c.env as RuntimeEnv | undefined)?.outgoing;
  if (typeof outgoing?.once === 'function') return outgoing as ClosingResponse;
  return {
    once: (_event, listener) => {
      void Promise.resolve(answer).then(listener, listener);
    },
  };
}

/** Hono middleware that rate limits the requests it sees. */
export function rateLimiter(options: HonoRateLimitOptions): HonoRateLimitMiddleware {
  if (options.concurrency !== undefined) {
    // Hono runs on runtimes without node's response events: a slot's release has nothing reliable to wait for.
    throw new InvalidOptionError('concurrency is held by the node:http, Express and Fastify middleware; on Hono, call limiter.acquire and permit.release around the handler (docs/concurrency.md)');
  }
  const limiter = new HttpRateLimiter<Context>(options, ['onLimited', 'remoteAddress']);
  const { onLimited } = options;
  const remoteAddress = options.remoteAddress ?? defaultRemoteAddress;
  if (onLimited !== undefined && typeof onLimited !== 'function') throw new InvalidOptionError(`onLimited must be a function (c, info) => Response, got ${describeValue(onLimited)}`);
  if (typeof remoteAddress !== 'function') throw new InvalidOptionError(`remoteAddress must be a function (c) => string | undefined, got ${describeValue(remoteAddress)}`);

  /** Hono's side of a verdict: the handler's turn (now or after shaping), or the answer. */
  const actions: VerdictActions<HonoExchange, Promise<void | Response> | Response> = {
    reportsHolder: (x) => x.c,
    accept: (x) => x.c.req.header('accept'),
    unavailable: ({ c }, headers) => c.body(UNAVAILABLE_BODY, 503, { ...Object.fromEntries(headers), 'content-type': 'application/json; charset=utf-8' }),
    skip: ({ next }) => next(),
    admit: ({ c, next }, headers, delayMs) => {
      const direct = setHeaders(c, headers);
      const run = (): Promise<void> => {
        if (direct || headers.length === 0) return next();
        // A handler that returned its own Response bypassed c.header(): add the headers it lacks.
        return next().then(() => {
          if (!c.res.headers.has(headers[0]![0])) addHeaders(c, headers);
        });
      };
      if (delayMs === 0) return run();
      return new Promise<void>((resolve) => setTimeout(resolve, delayMs)).then<void | Response>(() =>
        // The client left while its request waited its turn: do not run the handler for nobody.
        c.req.raw.signal?.aborted === true ? c.body(null, 408) : run(),
      );
    },
    refuse: ({ c }, headers, info) => {
      setHeaders(c, headers);
      if (onLimited !== undefined) return onLimited(c, info);
      if (c.req.method === 'HEAD') return c.body(null, 429, { 'content-type': info.body.contentType });
      return c.body(info.body.text, 429, { 'content-type': info.body.contentType });
    },
  };
  const finish = (c: Context, next: Next, verdict: Verdict): Promise<void | Response> | Response => {
    const answer = applyVerdict(limiter, verdict, { c, next }, actions);
    // With `settle`: an admitted request's reservation is settled once its response is done.
    limiter.settler?.settleAfter(c, responseDone(c, answer), () => c.res);
    return answer;
  };

  // Not async: a memory-store verdict is applied without waiting for a promise.
  const middleware: MiddlewareHandler = (c, next) => {
    let verdict: ReturnType<HttpRateLimiter<Context>['decide']>;
    try {
      verdict = limiter.decide(c, new HonoRequestView(limiter, c, remoteAddress(c)));
    } catch (error) {
      return Promise.reject(error);
    }
    if (verdict instanceof Promise) return verdict.then((resolved) => finish(c, next, resolved));
    return Promise.resolve(finish(c, next, verdict));
  };
  Object.defineProperty(middleware, 'limiter', { value: limiter });
  return middleware as HonoRateLimitMiddleware;
}
