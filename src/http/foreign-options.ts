/**
 * express-rate-limit's option names, recognised so that `rateLimit({ windowMs, max })` is refused
 * with what to write in Tollgate instead, not with a bare list of names. Each hint names the
 * Tollgate option (or says there is none, and what to do), using the caller's own values where it
 * can. docs/migrating.md has the same mapping as a table.
 */

/** The options a hint may quote (the caller's own values). */
type Given = Readonly<Record<string, unknown>>;

/** Where to go when Tollgate has no equivalent: keep express-rate-limit, count in Tollgate. */
const KEEP_ERL = "or keep express-rate-limit and give it Tollgate's counts: store: new TollgateStore({ store }) from 'tollgate/express-rate-limit'";

const SHAPING_HINT = "Tollgate slows requests down with a leaky-bucket policy and shaping: { maxDelay: '500ms', delayAfter: 2 }";

const HEADERS_HINT = "Tollgate takes headers: 'legacy' (X-RateLimit-*, the default), 'ietf' (the RateLimit-Policy and RateLimit fields), 'both' or 'none'";

/** express-rate-limit's option names (8.x, with its deprecated ones, and the express-slow-down ones it knows) → what Tollgate takes. */
const HINTS: Readonly<Record<string, (given: Given) => string>> = {
  windowMs: (given) => `Tollgate takes the window in the policy: policy: ${policyExample(given)} (window in ms or a duration such as '1m')`,
  limit: (given) => limitHint(given, 'limit'),
  max: (given) => limitHint(given, 'max'),
  statusCode: () => "Tollgate always refuses with 429 (503 when the store fails and failureMode is 'closed'); to answer with another status, answer yourself in onLimited",
  handler: () => 'Tollgate takes onLimited: it answers a refused request itself (the rate-limit headers are already set; its info carries retryAfter, the reports of every limit and the body Tollgate would have sent)',
  onLimitReached: () => 'Tollgate takes onLimited, called for every refused request (and it answers it)',
  legacyHeaders: () => HEADERS_HINT,
  standardHeaders: () => `${HEADERS_HINT}; 'ietf' is the closest to standardHeaders: 'draft-8'`,
  draft_polli_ratelimit_headers: () => HEADERS_HINT,
  identifier: () => "Tollgate names a limit in the IETF fields by its name: name: 'api' (or each limit's name in limits)",
  retryAfter: () => 'Tollgate has no equivalent: Retry-After is always the exact wait of the decision; to send something else, answer yourself in onLimited',
  requestPropertyName: () =>
    "Tollgate has no equivalent: it does not add a property to the request; an admitted request's quota is in the rate-limit headers set on the response, a refused one's in onLimited's info.reports",
  skipFailedRequests: () => refundHint(),
  skipSuccessfulRequests: () => refundHint(),
  requestWasSuccessful: () => refundHint(),
  keyGenerator: () =>
    "Tollgate takes key: (req, view) => string | undefined (undefined: the limit does not apply; view.ipKey is the client IP; byApiKey(), byJwt(), byHeader() from 'tollgate/http' are ready-made)",
  validate: () => 'Tollgate has no equivalent, nor needs one: every option is checked when the middleware is created, and there are no runtime warnings to turn off; remove it',
  passOnStoreError: (given) =>
    `Tollgate takes failureMode: ${given.passOnStoreError === true ? "'open'" : "'closed'"} ('open', the default, lets requests through when the store fails; 'closed' answers 503), and onError is told of each failure`,
  logger: () => 'Tollgate takes onError: (error, req) => void, told of each store failure (by default one line on stderr at most every 10 s)',
  delayAfter: () => SHAPING_HINT,
  delayMs: () => SHAPING_HINT,
  maxDelayMs: () => SHAPING_HINT,
};

/** The names above that come from express-slow-down (which express-rate-limit also recognises). */
const SLOW_DOWN_NAMES: ReadonlySet<string> = new Set(['delayAfter', 'delayMs', 'maxDelayMs']);

function limitHint(given: Given, name: 'limit' | 'max'): string {
  if (typeof given[name] === 'function') {
    return `Tollgate has no limit computed per request: give each kind of caller its own limit, limits: [{ name, policy, key }], where a key that returns undefined leaves that caller out of the limit`;
  }
  return `Tollgate takes the limit in the policy: policy: ${policyExample(given)}`;
}

function refundHint(): string {
  return `Tollgate has no equivalent: it decides before the handler runs and never gives a request back; leave requests out with skip, or charge them nothing with cost: 0, ${KEEP_ERL}, which refunds`;
}

/** `{ algorithm: 'fixed-window', limit, window }` with the caller's figures where they are numbers. */
function policyExample(given: Given): string {
  const limit = [given.limit, given.max].find((value) => typeof value === 'number') ?? 100;
  const window = typeof given.windowMs === 'number' ? given.windowMs : 60_000;
  return `{ algorithm: 'fixed-window', limit: ${String(limit)}, window: ${String(window)} }`;
}

/**
 * Why each express-rate-limit option name in `options` is not taken, one line each, or undefined
 * when there is none. `known` are the names the middleware takes (some are the same in both:
 * `message`, `skip`, `store`, `ipv6Subnet`, `headers`; those are checked as Tollgate's).
 */
export function foreignOptionHints(options: object, known: readonly string[]): string | undefined {
  const given = options as Given;
  const lines: string[] = [];
  for (const name of Object.keys(options)) {
    if (!Object.hasOwn(HINTS, name) || known.includes(name)) continue;
    const origin = SLOW_DOWN_NAMES.has(name) ? 'express-slow-down' : 'express-rate-limit';
    lines.push(`${name} is ${origin}'s name: ${HINTS[name]!(given)}`);
  }
  return lines.length === 0 ? undefined : lines.join('\n');
}

/** The hint for an express-rate-limit store given as `store` (it has `increment`, Tollgate's have `consume`). */
export function foreignStoreHint(store: unknown): string | undefined {
  if (typeof store !== 'object' || store === null || typeof (store as { increment?: unknown }).increment !== 'function') return undefined;
  return `store is an express-rate-limit store: Tollgate takes its own, memoryStore() or redisStore({ url }) from 'tollgate', ${KEEP_ERL}`;
}
