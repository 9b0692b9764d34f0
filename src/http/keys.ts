/**
 * Ready-made `key` functions: who a request counts against. Each works with every adapter, since
 * it reads only the framework-neutral {@link RequestView}.
 */
import { InvalidOptionError, describeValue } from '../errors.js';
import type { KeyFunction, RequestView } from './core.js';
import { apiKeyIdentity, clientIp, jwtIdentity, type ApiKeyOptions, type ClientIpOptions, type JwtOptions } from './identity/index.js';

/** The client IP (IPv6 by subnet). Without options it follows the middleware's trusted-proxy settings. */
export function byIp(options?: ClientIpOptions): KeyFunction<unknown> {
  if (options === undefined) return (_req, view) => view.ipKey;
  const resolver = clientIp(options);
  return (_req, view) => resolver.key(view.remoteAddress, view.header);
}

/** The API key in a header (default `x-api-key`), hashed: `key:<base64url>`. No key: the limit does not apply. */
export function byApiKey(options?: ApiKeyOptions): KeyFunction<unknown> {
  const resolve = apiKeyIdentity(options);
  return (_req, view) => resolve(view.header);
}

/** The user of a verified JWT (`user:<claim>`). No valid token: the limit does not apply. */
export function byJwt(options: JwtOptions): KeyFunction<unknown> {
  const resolve = jwtIdentity(options);
  return (_req, view) => resolve(view.header);
}

/**
 * A header's value as the key (`<name>:<value>`), for headers a trusted gateway sets (a tenant id,
 * say). Never use it for a header clients choose freely: they would pick a fresh key each time.
 */
export function byHeader(name: string): KeyFunction<unknown> {
  if (typeof name !== 'string' || !/^[a-z0-9!#$%&'*+.^_`|~-]+$/i.test(name)) {
    throw new InvalidOptionError(`byHeader needs a header name like 'x-tenant-id', got ${describeValue(name)}`);
  }
  const lower = name.toLowerCase();
  return (_req: unknown, view: RequestView) => {
    const value = view.header(lower);
    return value === undefined || value === '' ? undefined : `${lower}:${value}`;
  };
}
