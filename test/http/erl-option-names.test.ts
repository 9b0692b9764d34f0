/**
 * express-rate-limit's option names given to Tollgate's own middleware are refused with what to
 * write instead (docs/migrating.md has the same mapping), on every adapter; a misspelt Tollgate
 * option still gets "did you mean", or the list of every option.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError, memoryStore } from '../../src/index.js';
import { rateLimit } from '../../src/http/index.js';
import { rateLimitHook } from '../../src/http/fastify.js';
import { rateLimiter } from '../../src/http/hono.js';

const policy = { algorithm: 'fixed-window', limit: 5, window: '1m' } as const;

const makers: Array<[string, (options: unknown) => unknown]> = [
  ['rateLimit', (options) => rateLimit(options as never)],
  ['rateLimitHook', (options) => rateLimitHook(options as never)],
  ['rateLimiter', (options) => rateLimiter(options as never)],
];

/** The option names express-rate-limit's own check knows (its `knownOptions` validation), read from the installed package. */
function expressRateLimitOptionNames(): string[] {
  const source = readFileSync(new URL('../../node_modules/express-rate-limit/dist/index.mjs', import.meta.url), 'utf8');
  const map = /knownOptions\(passedOptions\) \{[^]*?const optionsMap = \{([^}]*)\}/.exec(source);
  if (map === null) throw new Error('express-rate-limit changed: knownOptions not found');
  return [...map[1]!.matchAll(/(\w+): true/g)].map((match) => match[1]!);
}

/** Each express-rate-limit name Tollgate does not share → what its refusal must say. */
const REFUSALS: Array<[string, unknown, RegExp]> = [
  ['windowMs', { windowMs: 60_000 }, /windowMs is express-rate-limit's name: Tollgate takes the window in the policy: policy: \{ algorithm: 'fixed-window', limit: 100, window: 60000 \}/],
  ['limit', { limit: 20 }, /limit is express-rate-limit's name: Tollgate takes the limit in the policy: policy: \{ algorithm: 'fixed-window', limit: 20, window: 60000 \}/],
  ['max', { max: 7 }, /max is express-rate-limit's name: .*policy: \{ algorithm: 'fixed-window', limit: 7, window: 60000 \}/],
  ['limit (a function)', { limit: () => 10 }, /limit is express-rate-limit's name: Tollgate has no limit computed per request: .*limits: \[\{ name, policy, key \}\]/],
  ['statusCode', { statusCode: 503 }, /statusCode is express-rate-limit's name: Tollgate always refuses with 429 .*onLimited/],
  ['handler', { handler: () => {} }, /handler is express-rate-limit's name: Tollgate takes onLimited/],
  ['legacyHeaders', { legacyHeaders: false }, /legacyHeaders is express-rate-limit's name: Tollgate takes headers: 'legacy'/],
  ['standardHeaders', { standardHeaders: 'draft-8' }, /standardHeaders is express-rate-limit's name: Tollgate takes headers: .*'ietf' is the closest to standardHeaders: 'draft-8'/],
  ['identifier', { identifier: 'api' }, /identifier is express-rate-limit's name: Tollgate names a limit .* name: 'api'/],
  ['retryAfter', { retryAfter: 60 }, /retryAfter is express-rate-limit's name: Tollgate has no equivalent: .*onLimited/],
  ['requestPropertyName', { requestPropertyName: 'rateLimit' }, /requestPropertyName is express-rate-limit's name: Tollgate has no equivalent: .*info\.reports/],
  ['skipFailedRequests', { skipFailedRequests: true }, /skipFailedRequests is express-rate-limit's name: Tollgate has no equivalent: .*skip.*cost: 0.*TollgateStore/],
  ['skipSuccessfulRequests', { skipSuccessfulRequests: true }, /skipSuccessfulRequests is express-rate-limit's name: Tollgate has no equivalent: .*TollgateStore/],
  ['requestWasSuccessful', { requestWasSuccessful: () => true }, /requestWasSuccessful is express-rate-limit's name: Tollgate has no equivalent: .*TollgateStore/],
  ['keyGenerator', { keyGenerator: () => 'k' }, /keyGenerator is express-rate-limit's name: Tollgate takes key: \(req, view\) => string \| undefined/],
  ['validate', { validate: false }, /validate is express-rate-limit's name: Tollgate has no equivalent, nor needs one: .*remove it/],
  ['passOnStoreError', { passOnStoreError: true }, /passOnStoreError is express-rate-limit's name: Tollgate takes failureMode: 'open'/],
  ['passOnStoreError: false', { passOnStoreError: false }, /passOnStoreError is express-rate-limit's name: Tollgate takes failureMode: 'closed'/],
  ['logger', { logger: console }, /logger is express-rate-limit's name: Tollgate takes onError: \(error, req\) => void/],
  ['onLimitReached (deprecated)', { onLimitReached: () => {} }, /onLimitReached is express-rate-limit's name: Tollgate takes onLimited/],
  ['draft_polli_ratelimit_headers (deprecated)', { draft_polli_ratelimit_headers: true }, /draft_polli_ratelimit_headers is express-rate-limit's name: Tollgate takes headers:/],
  ['delayMs (express-slow-down)', { delayMs: 500 }, /delayMs is express-slow-down's name: Tollgate slows requests down with a leaky-bucket policy and shaping:/],
  // Names both have, given in express-rate-limit's shape.
  ['headers: true (deprecated legacyHeaders)', { policy, headers: true }, /headers: true is express-rate-limit's old name for legacyHeaders; Tollgate takes headers: 'legacy'/],
  ['message as an object', { policy, message: { error: 'slow down' } }, /message must be a string .*got an object; .*answer in onLimited/],
  ['message as a function', { policy, message: () => 'slow down' }, /message must be a string .*got a function; .*onLimited/],
  ['ipv6Subnet: false', { policy, ipv6Subnet: false }, /ipv6Subnet must be a prefix length from 32 to 64, got false \(express-rate-limit's shape\).*key: \(req, view\)/],
  ['ipv6Subnet as a function', { policy, ipv6Subnet: () => 64 }, /ipv6Subnet must be a prefix length .*got a function/],
  ['an express-rate-limit store', { policy, store: { increment() {}, decrement() {}, resetKey() {} } }, /store is an express-rate-limit store: Tollgate takes its own, memoryStore\(\) or redisStore\(\{ url \}\).*TollgateStore/],
];

describe("express-rate-limit's option names, given to Tollgate's rateLimit()", () => {
  for (const [maker, make] of makers) {
    it.each(REFUSALS)(`${maker}: %s is refused with what to write instead`, (_name, options, message) => {
      let error: unknown;
      try {
        make(options);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).code).toBe('ERR_TOLLGATE_INVALID_OPTION');
      expect((error as Error).message).toMatch(message);
    });
  }

  it('covers every option name express-rate-limit knows, each with a hint that names what to use', () => {
    const names = expressRateLimitOptionNames();
    expect(names).toEqual(expect.arrayContaining(['windowMs', 'limit', 'max', 'keyGenerator', 'handler', 'store', 'validate', 'ipv6Subnet']));
    const shared = ['message', 'skip', 'store', 'ipv6Subnet', 'headers'];
    for (const name of names.filter((n) => !shared.includes(n))) {
      const message = refusal({ [name]: 1 });
      expect(message, name).toMatch(new RegExp(`^rate limit: ${name} is express-rate-limit's name: Tollgate (takes|has no|always|names|slows)`));
    }
  });

  it("quotes the caller's own figures: rateLimit({ windowMs: 60000, max: 100 }) names both, with one policy", () => {
    const message = refusal({ windowMs: 15 * 60_000, max: 100 });
    expect(message).toBe(
      [
        "rate limit: windowMs is express-rate-limit's name: Tollgate takes the window in the policy: policy: { algorithm: 'fixed-window', limit: 100, window: 900000 } (window in ms or a duration such as '1m')",
        "max is express-rate-limit's name: Tollgate takes the limit in the policy: policy: { algorithm: 'fixed-window', limit: 100, window: 900000 }",
      ].join('\n'),
    );
  });

  it('accepts the names both share, in the shape Tollgate takes', () => {
    const store = memoryStore();
    const middleware = rateLimit({ policy, message: 'slow down', skip: () => false, store, ipv6Subnet: 64, headers: 'both' });
    expect(typeof middleware).toBe('function');
  });
});

describe('a misspelt Tollgate option', () => {
  it.each([
    ['polcy', 'policy'],
    ['Policy', 'policy'],
    ['failuremode', 'failureMode'],
    ['trustPoxy', 'trustProxy'],
    ['onlimited', 'onLimited'],
  ])('%s gets "did you mean %s?"', (typo, meant) => {
    expect(refusal({ policy, [typo]: 1 })).toBe(`unknown rate limit option ${JSON.stringify(typo)}; did you mean ${JSON.stringify(meant)}?`);
  });

  it('a name close to none gets the list of every option', () => {
    expect(refusal({ policy, frobnicate: 1 })).toBe(
      'unknown rate limit option "frobnicate"; the rate limit options are store, policy, limits, name, rules, domain, descriptors, key, cost, skip, headers, message, shaping, failureMode, expectedNodes, deadlineMs, breaker, failClosedStatus, overLimitCache, onError, trustProxy, proxyHeader, ipv6Subnet, clock, settle, concurrency, onLimited',
    );
  });

  it("Hono's remoteAddress is suggested on Hono only", () => {
    expect(() => rateLimiter({ policy, remoteAdress: () => '192.0.2.1' } as never)).toThrow('did you mean "remoteAddress"?');
    expect(() => rateLimit({ policy, remoteAdress: () => '192.0.2.1' } as never)).toThrow(/unknown rate limit option "remoteAdress"; the rate limit options are/);
  });
});

/** The message `rateLimit(options)` is refused with. */
function refusal(options: Record<string, unknown>): string {
  try {
    rateLimit(options as never);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidOptionError);
    return (error as Error).message;
  }
  throw new Error(`rateLimit(${Object.keys(options).join(', ')}) was accepted`);
}
