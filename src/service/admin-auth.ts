/**
 * The admin endpoints' gate: the Bearer token check (constant time) and the audit line each admin
 * request leaves (audit.ts). Every admin route is wrapped by {@link adminRoute}, so no admin
 * handler runs unauthenticated and none is left out of the audit log.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuditAction, AuditSubject } from './audit.js';
import { bearerToken } from './audit.js';
import type { ServiceContext } from './context.js';
import { HttpError, errorReply } from './http-util.js';

/** An admin route's handler: `subject` takes the domains or key it acted on, for the audit line. */
export type AdminHandler = (request: IncomingMessage, response: ServerResponse, url: () => URL, subject: AuditSubject) => Promise<void> | void;

/** Why a request is refused admin access (401 or 403), or undefined when its token is the admin token. */
function refusal(ctx: ServiceContext, request: IncomingMessage): { error: HttpError; reason: string } | undefined {
  const expected = ctx.options.adminToken;
  if (expected === undefined) {
    return { error: new HttpError(403, 'admin endpoints are disabled: start the service with --admin-token (or TOLLGATE_ADMIN_TOKEN)'), reason: 'admin disabled' };
  }
  const given = bearerToken(request);
  // Hash both sides so the comparison takes the same time whatever the lengths.
  const a = createHash('sha256').update(given ?? '').digest();
  const b = createHash('sha256').update(expected).digest();
  if (given !== undefined && timingSafeEqual(a, b)) return undefined;
  const reason = given === undefined ? (request.headers.authorization === undefined ? 'no Authorization header' : 'not a Bearer token') : 'wrong token';
  return { error: new HttpError(401, 'a valid admin token is required: Authorization: Bearer <token>'), reason };
}

/**
 * Wraps an admin route: a refused authentication is logged (rate limited) and answered 401/403;
 * with an `action`, the request leaves one audit line with its outcome, whether it succeeds or
 * throws. Reads (inspecting keys) pass no action: only their refused authentications are logged.
 */
export function adminRoute(ctx: ServiceContext, action: AuditAction | undefined, handler: AdminHandler): (request: IncomingMessage, response: ServerResponse, url: () => URL) => Promise<void> {
  return async (request, response, url) => {
    const refused = refusal(ctx, request);
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
