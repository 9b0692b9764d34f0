/**
 * The admin listener's gates: the admin endpoints' Bearer token check (constant time) and the audit
 * line each admin request leaves (audit.ts), and the observability pages' optional token
 * ({@link observeGuard}). Both slow down an address that keeps sending wrong tokens (backoff.ts). Every admin route is wrapped by {@link adminRoute}, so no admin handler
 * runs unauthenticated and none is left out of the audit log.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditAction, AuditSubject } from './audit.js';
import { bearerToken, remoteAddress } from './audit.js';
import { AuthBackoff } from './backoff.js';
import type { ServiceContext } from '../context.js';
import { HttpError, errorReply } from '../http/body.js';

/** An admin route's handler: `subject` takes the domains or key it acted on, for the audit line. */
export type AdminHandler = (request: IncomingMessage, response: ServerResponse, url: () => URL, subject: AuditSubject) => Promise<void> | void;

/** Whether `given` is `expected`, in a time that depends on neither (both sides are hashed first). */
function sameToken(given: string | undefined, expected: string): boolean {
  const a = createHash('sha256').update(given ?? '').digest();
  const b = createHash('sha256').update(expected).digest();
  return given !== undefined && timingSafeEqual(a, b);
}

/** Why a token was refused, for the audit line. */
function refusedBecause(request: IncomingMessage, given: string | undefined): string {
  return given === undefined ? (request.headers.authorization === undefined ? 'no Authorization header' : 'not a Bearer token') : 'wrong token';
}

/** Why a request is refused admin access (401 or 403), or undefined when its token is the admin token. */
function refusal(ctx: ServiceContext, request: IncomingMessage): { error: HttpError; reason: string } | undefined {
  const expected = ctx.options.adminToken;
  if (expected === undefined) {
    return { error: new HttpError(403, 'admin endpoints are disabled: start the service with --admin-token (or TOLLGATE_ADMIN_TOKEN)'), reason: 'admin disabled' };
  }
  const given = bearerToken(request);
  if (sameToken(given, expected)) return undefined;
  const reason = refusedBecause(request, given);
  return { error: new HttpError(401, 'a valid admin token is required: Authorization: Bearer <token>'), reason };
}

const backoffs = new WeakMap<ServiceContext, AuthBackoff>();

/** The service's backoff of token guessers, made on first use. */
function backoffOf(ctx: ServiceContext): AuthBackoff {
  let backoff = backoffs.get(ctx);
  if (backoff === undefined) backoffs.set(ctx, (backoff = new AuthBackoff(ctx.clock)));
  return backoff;
}

/**
 * The 429 for a request from an address locked out for its wrong tokens (logged as a failed login,
 * its token not compared), or undefined when the address is not locked out.
 */
function lockedOut(ctx: ServiceContext, request: IncomingMessage): HttpError | undefined {
  const lockedForMs = backoffOf(ctx).lockedFor(remoteAddress(request));
  if (lockedForMs === 0) return undefined;
  ctx.audit.failedLogin(request, 429, 'locked out after repeated wrong tokens');
  const seconds = Math.ceil(lockedForMs / 1_000);
  return new HttpError(429, `too many wrong tokens from this address: try again in ${seconds} s`, 'ERR_TOLLGATE_AUTH_BACKOFF', { 'retry-after': String(seconds) });
}

/** Counts a wrong token (a lockout it starts is audited), or forgets the address's failures on a right one. */
function tokenChecked(ctx: ServiceContext, request: IncomingMessage, right: boolean): void {
  const backoff = backoffOf(ctx);
  const address = remoteAddress(request);
  if (right) return backoff.succeeded(address);
  const lockout = backoff.failed(address);
  if (lockout !== undefined) ctx.audit.lockout(request, lockout.failures, lockout.lockoutMs);
}

/**
 * Wraps an admin route: a refused authentication is logged (rate limited) and answered 401/403;
 * with an `action`, the request leaves one audit line with its outcome, whether it succeeds or
 * throws. Reads (inspecting keys) pass no action: only their refused authentications are logged.
 */
export function adminRoute(ctx: ServiceContext, action: AuditAction | undefined, handler: AdminHandler): (request: IncomingMessage, response: ServerResponse, url: () => URL) => Promise<void> {
  return async (request, response, url) => {
    const locked = lockedOut(ctx, request);
    if (locked !== undefined) throw locked;
    const refused = refusal(ctx, request);
    // Only a Bearer token given is a guess (none, or another scheme, guesses nothing); nor is a 403 (admin disabled: no token to find).
    if (refused === undefined || (refused.error.status === 401 && bearerToken(request) !== undefined)) tokenChecked(ctx, request, refused === undefined);
    if (refused !== undefined) {
      ctx.audit.failedLogin(request, refused.error.status, refused.reason);
      throw refused.error;
    }
    const subject: AuditSubject = {};
    if (action === undefined) return handler(request, response, url, subject);
    try {
      await handler(request, response, url, subject);
    } catch (error) {
      ctx.audit.action(request, action, subject, errorReply(error).status);
      throw error;
    }
    ctx.audit.action(request, action, subject, response.statusCode);
  };
}

/** `Authorization: Basic base64(user:password)`: the password, which a browser sends once asked (the user is ignored). */
const BASIC = /^basic +([A-Za-z0-9+/=]+)\s*$/i;

function basicPassword(request: IncomingMessage): string | undefined {
  const encoded = BASIC.exec(request.headers.authorization ?? '')?.[1];
  if (encoded === undefined) return undefined;
  const decoded = Buffer.from(encoded, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}

/**
 * The observability pages' gate (`--metrics-token`): undefined (let in) when no metrics token is
 * set, or when the request carries it or the admin token, as a Bearer token (Prometheus, curl) or
 * as a Basic password (a browser on the dashboard); else a 401, logged like a failed admin login.
 */
export function observeGuard(ctx: ServiceContext): ((request: IncomingMessage) => HttpError | undefined) | undefined {
  const { metricsToken, adminToken } = ctx.options;
  if (metricsToken === undefined) return undefined;
  const accepted = adminToken === undefined ? [metricsToken] : [metricsToken, adminToken];
  return (request) => {
    const locked = lockedOut(ctx, request);
    if (locked !== undefined) return locked;
    const given = bearerToken(request) ?? basicPassword(request);
    // Every accepted token is compared, so the time taken does not say which one matched.
    const matches = accepted.map((token) => sameToken(given, token));
    // A page asked without any token is a browser before its prompt, not a guess.
    if (given !== undefined) tokenChecked(ctx, request, matches.includes(true));
    if (matches.includes(true)) return undefined;
    ctx.audit.failedLogin(request, 401, `metrics token: ${refusedBecause(request, given)}`);
    return new HttpError(401, 'this page needs the metrics token: Authorization: Bearer <token> (--metrics-token)');
  };
}
