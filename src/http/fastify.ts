/**
 * Fastify: `app.register(tollgate, options)` limits every request of the app at `onRequest`, 404s
 * included (the plugin is not encapsulated); `rateLimitHook(options)` limits one route or one
 * encapsulated context (`{ onRequest: rateLimitHook(...) }`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestHookHandler } from 'fastify';
import { InvalidOptionError, describeValue } from '../errors.js';
import type { RequestSlots } from './concurrency.js';
import { HttpRateLimiter, NodeRequestView, type CoreOptions } from './core.js';
import { UNAVAILABLE_BODY, type LimitedInfo } from './report.js';
import type { SettleHook } from './settle.js';
import { applyVerdict, type Verdict, type VerdictActions } from './verdict.js';

/** One request as the hook handles it. */
interface FastifyExchange {
  readonly request: FastifyRequest;
  readonly reply: FastifyReply;
  readonly done: (error?: Error) => void;
}

export interface FastifyRateLimitOptions extends CoreOptions<FastifyRequest> {
  /** Answers a throttled request instead of Tollgate's 429 (the rate-limit headers are already set). */
  readonly onLimited?: (request: FastifyRequest, reply: FastifyReply, info: LimitedInfo) => void;
  /** Cost known after the response (docs/http.md): `cost` is reserved as the estimate, this says what the request took once its reply is done. */
  readonly settle?: SettleHook<FastifyRequest, FastifyReply>;
}

/** The hook, with its validated configuration. */
export type RateLimitHook = onRequestHookHandler & { readonly limiter: HttpRateLimiter<FastifyRequest> };

/** An `onRequest` hook that rate limits; use it on a route or inside a plugin. */
export function rateLimitHook(options: FastifyRateLimitOptions): RateLimitHook {
  const limiter = new HttpRateLimiter<FastifyRequest>(options, ['onLimited']);
  const onLimited = options.onLimited;
  if (onLimited !== undefined && typeof onLimited !== 'function') {
    throw new InvalidOptionError(`onLimited must be a function (request, reply, info) => void, got ${describeValue(onLimited)}`);
  }

  const actions: VerdictActions<FastifyExchange, void> = {
    reportsHolder: (x) => x.request.raw,
    accept: (x) => x.request.headers.accept,
    unavailable: ({ reply }, headers) => {
      for (const [name, value] of headers) reply.header(name, value);
      reply.code(503).type('application/json; charset=utf-8').send(UNAVAILABLE_BODY);
    },
    skip: ({ done }) => done(),
    admit: ({ request, reply, done }, headers, delayMs) => {
      for (const [name, value] of headers) reply.header(name, value);
      if (delayMs === 0) done();
      else setTimeout(() => (request.raw.destroyed ? undefined : done()), delayMs);
    },
    refuse: ({ request, reply }, headers, info) => {
      for (const [name, value] of headers) reply.header(name, value);
      // Calling send() without done() ends the request here: no handler, no later hooks.
      if (onLimited !== undefined) onLimited(request, reply, info);
      else reply.code(429).type(info.body.contentType).send(info.body.text);
    },
  };
  const slots = limiter.slots;
  const apply = (request: FastifyRequest, reply: FastifyReply, verdict: Verdict, done: (error?: Error) => void): void => {
    // With `settle`: an admitted request's reservation is settled once its reply is done (node's 'close').
    limiter.settler?.settleAfter(request, reply.raw, () => reply);
    applyVerdict(limiter, verdict, { request, reply, done: slots === undefined || verdict.skipped === true ? done : () => holdSlot(limiter, slots, request, reply, done) }, actions);
  };

  const hook = function tollgateRateLimit(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
    let verdict: ReturnType<HttpRateLimiter<FastifyRequest>['decide']>;
    try {
      verdict = limiter.decide(request, new NodeRequestView(limiter, request.raw));
    } catch (error) {
      done(error as Error);
      return;
    }
    if (verdict instanceof Promise) verdict.then((resolved) => apply(request, reply, resolved, done), done);
    else apply(request, reply, verdict, done);
  };
  Object.defineProperty(hook, 'limiter', { value: limiter });
  return hook as unknown as RateLimitHook;
}

/** With `concurrency`: a slot for the admitted request, released when its response finishes or closes (concurrency.ts). */
function holdSlot(limiter: HttpRateLimiter<FastifyRequest>, slots: RequestSlots<FastifyRequest>, request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void): void {
  slots.hold(request, new NodeRequestView(limiter, request.raw), reply.raw).then((refused) => {
    if (refused === undefined) return done();
    for (const [name, value] of refused.headers) reply.header(name, value);
    void reply.code(refused.status).type('application/json; charset=utf-8').send(refused.body);
  }, done);
}

/**
 * The Fastify plugin: limits every request of the instance it is registered on (and its
 * children), 404s included. The store it created is closed with the instance.
 */
export function tollgate(fastify: FastifyInstance, options: FastifyRateLimitOptions, done: (error?: Error) => void): void {
  let hook: RateLimitHook;
  try {
    hook = rateLimitHook(options);
  } catch (error) {
    done(error as Error);
    return;
  }
  fastify.addHook('onRequest', hook);
  fastify.addHook('onClose', (_instance, closed) => {
    hook.limiter.close().then(() => closed(), closed);
  });
  done();
}
// Not encapsulated (what fastify-plugin does): the hook reaches the routes and 404 handler of the
// instance that registers it.
Object.assign(tollgate, { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'tollgate' });

export default tollgate;
