/** `tollgate/http`: middleware for node:http, Express and Connect, and the pieces every adapter shares. */
export { rateLimit } from './node.js';
export type { RateLimitOptions, RateLimitMiddleware } from './node.js';
export { HttpRateLimiter } from './core.js';
export type { CoreOptions, KeyFunction, CostOption, LimitSpec, ShapingOptions, RequestView, Verdict } from './core.js';
export { byApiKey, byJwt, byHeader, byIp } from './keys.js';
export { clientIp, normalizeIp } from './identity/index.js';
export type { ClientIp, ClientIpOptions, ApiKeyOptions, JwtOptions } from './identity/index.js';
export { rateLimitHeaders, limitedBody, QUOTA_EXCEEDED_TYPE } from './report.js';
export type { LimitReport, LimitedInfo, LimitedBody, HeaderStyle } from './report.js';
export type { ConcurrencyOptions } from './options.js';
