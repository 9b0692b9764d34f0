/**
 * Who is calling: the rate-limit key of a request, independent of any HTTP framework. The
 * middleware hands in the socket address and a header reader; the modules under identity/ answer
 * with a key such as `ip:203.0.113.7`, `ip:2001:db8:1200::/56`, `key:<hash of an API key>` or
 * `user:<JWT claim>`.
 *
 * - identity/addresses.ts: parsing and printing IP addresses (every spelling of one address gives one key)
 * - identity/client-ip.ts: the client behind trusted proxies, and its key (IPv6 by subnet)
 * - identity/trusted-proxies.ts, identity/forwarded.ts: the `trustProxy` list and the forwarded headers
 * - identity/api-key.ts: hashed API keys
 * - identity/jwt.ts, identity/jwt-options.ts: JWTs verified with jose, and the options checked at startup
 * - identity/credentials.ts, identity/text.ts: what the API-key and JWT identities share, and header scanning
 */
export type { HeaderGetter } from './text.js';
export { normalizeIp } from './addresses.js';
export { clientIp, UNKNOWN_IP_KEY, MAX_FORWARDED_HOPS, MAX_FORWARDED_HEADER_READ } from './client-ip.js';
export type { ClientIp, ClientIpOptions } from './client-ip.js';
export { apiKeyIdentity, MAX_API_KEY_LENGTH } from './api-key.js';
export type { ApiKeyOptions } from './api-key.js';
export { jwtIdentity, MAX_JWT_LENGTH, MAX_JWT_CACHE_MS } from './jwt.js';
export type { JwtOptions } from './jwt-options.js';
