/**
 * The overrides' admin routes: `PUT /v1/overrides` (YAML documents or JSON, one override or an
 * array, in the rules' shape with an optional `expires`), `GET /v1/overrides` (the list, with
 * expiries and the rule each shadows) and `DELETE /v1/overrides` (one, by domain and path; all of a
 * domain only with `all=true`). Behind the admin token and audited (auth.ts). With Redis, changes
 * go through the shared store (OverridesSync) to every node; without, to this node's holder.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_OVERRIDE_BYTES, readOverrides, type OverrideEntry } from '../../rules/overrides.js';
import { adminRoute } from './auth.js';
import type { ServiceContext } from '../context.js';
import type { HttpRoutes } from '../http/listener.js';
import { HttpError, readBody, sendJson } from '../http/body.js';

const DELETE_HELP = 'give the override to delete: ?domain=api&entry=user=acme (one entry=key=value per level), or ?domain=api&all=true for every override of the domain';

/** Adds the overrides' routes to the admin listener's table. */
export function addOverrideRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/overrides', adminRoute(ctx, undefined, (_request, response) => {
    sendJson(response, 200, { overrides: ctx.holder.overrides() });
  }), 'admin');

  routes.add('PUT', '/v1/overrides', adminRoute(ctx, 'overrides.put', async (request, response, _url, subject) => {
    const text = await readBody(request, MAX_OVERRIDE_BYTES);
    const put = ctx.overrides !== undefined ? await ctx.overrides.putOverride(text, 'PUT /v1/overrides') : putHere(ctx, text);
    subject.domains = [...new Set(put.map((override) => override.domain))];
    subject.overrides = put.map((override) => override.id);
    sendJson(response, 200, { put, version: ctx.holder.current.version });
  }), 'admin');

  routes.add('DELETE', '/v1/overrides', adminRoute(ctx, 'overrides.delete', (request, response, url, subject) => deleteRoute(ctx, request, response, url(), subject)), 'admin');
}

/** No Redis: this node's holder only (the same checks). */
function putHere(ctx: ServiceContext, text: string): ReturnType<ServiceContext['holder']['putOverride']> {
  return ctx.holder.putOverride(readOverrides(text, ctx.clock(), 'PUT /v1/overrides').map((override) => ({ ...override.written, ...(override.expiresAt !== undefined ? { expires: new Date(override.expiresAt).toISOString() } : {}) })));
}

async function deleteRoute(ctx: ServiceContext, _request: IncomingMessage, response: ServerResponse, url: URL, subject: { domains?: readonly string[]; overrides?: readonly string[] }): Promise<void> {
  const domain = url.searchParams.get('domain');
  if (domain === null || domain === '') throw new HttpError(400, DELETE_HELP);
  subject.domains = [domain];
  const entries = url.searchParams.getAll('entry').map(entryOf);
  const all = url.searchParams.get('all');
  if (all !== null && all !== 'true') throw new HttpError(400, `all must be true (every override of the domain), got ${JSON.stringify(all)}`);
  if (all === 'true') {
    if (entries.length > 0) throw new HttpError(400, 'give either entry=... (one override) or all=true (every override of the domain), not both');
    const deleted = ctx.overrides !== undefined ? await ctx.overrides.deleteOverrides(domain) : ctx.holder.deleteOverrides(domain);
    sendJson(response, 200, { domain, deleted });
    return;
  }
  if (entries.length === 0) throw new HttpError(400, DELETE_HELP);
  const deleted = ctx.overrides !== undefined ? await ctx.overrides.deleteOverride(domain, entries) : ctx.holder.deleteOverride(domain, entries);
  if (!deleted) throw new HttpError(404, `no override of domain ${domain} at ${entries.map((e) => `${e.key}=${e.value}`).join(', ')}; GET /v1/overrides lists them`);
  sendJson(response, 200, { domain, entries, deleted: 1 });
}

/** `key=value` (split at the first `=`). */
function entryOf(text: string): OverrideEntry {
  const at = text.indexOf('=');
  if (at <= 0) throw new HttpError(400, `entry must be key=value (e.g. entry=user=acme), got ${JSON.stringify(text)}`);
  return { key: text.slice(0, at), value: text.slice(at + 1) };
}
