/** `tollgate/client`: a `fetch` for callers of rate-limited APIs (it does not need a limiter). */
export { createClient, rateLimitedFetch } from './client.js';
export type { TollgateClient } from './client.js';
export { readRateLimit, parseRetryAfter } from './headers.js';
export type { RateLimitInfo } from './headers.js';
export { CLIENT_DEFAULTS } from './options.js';
export type { ClientOptions, FetchFunction, PacingOptions, RetryBudgetOptions, RetryEvent } from './options.js';
