/**
 * The admin API's routes, on the admin listener only (planes.ts): the rules in force (`GET
 * /v1/rules`, envoy's `/rlconfig`: read-only, behind the metrics token when one is set) and the
 * changes (`PUT /v1/rules`, the `/v1/keys` endpoints: behind the admin token, audited, auth.ts).
 */
import { compilePolicy, type CompiledPolicy, type Policy } from '../../policy.js';
import { parseRules } from '../../rules/parse/index.js';
import { compileRules } from '../../rules/ruleset.js';
import { describeValue } from '../../errors.js';
import { adminRoute } from './auth.js';
import { addOverrideRoutes } from './overrides.js';
import { denyAllWarnings } from './deny-all.js';
import { addUsageRoute } from './usage-route.js';
import { addLedgerRoute } from './ledger-route.js';
import { blockScope } from '../check/blocks.js';
import type { ServiceContext } from '../context.js';
import type { HttpRoutes } from '../http/listener.js';
import { HttpError, readBody, readJson, sendJson } from '../http/body.js';

/** Adds the admin API's routes to the admin listener's table. */
export function addAdminRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  addRulesRoutes(ctx, routes);
  addKeyRoutes(ctx, routes);
  addUsageRoute(ctx, routes);
  addLedgerRoute(ctx, routes);
  addOverrideRoutes(ctx, routes);
}

/** The rules in force, and replacing domains (admin). */
function addRulesRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/rules', (_request, response) => {
    const rules = ctx.holder.current;
    sendJson(response, 200, {
      version: rules.version,
      domains: rules.domainNames(),
      ...(ctx.watcher !== undefined ? { files: ctx.watcher.status() } : {}),
      ...(ctx.sync !== undefined ? { pushed: ctx.sync.status() } : {}),
      ...overriddenRules(ctx),
    });
  });

  // envoy's /rlconfig: the limits in force, one per line.
  routes.add('GET', '/rlconfig', (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
    response.end(ctx.holder.current.dump());
  });

  routes.add('PUT', '/v1/rules', adminRoute(ctx, 'rules.push', async (request, response, _url, subject) => {
    const yaml = await readBody(request);
    // Parsed here too (the sync parses again before storing): a rule denying everything is answered with a warning.
    const parsed = parseRules(yaml, 'PUT /v1/rules');
    const warnings = denyAllWarnings(parsed);
    if (warnings.length > 0) ctx.logger.warn({ warnings }, `pushed rules deny every request of a key: ${warnings.join('; ')}`);
    const warned = warnings.length > 0 ? { warnings } : {};
    if (ctx.sync !== undefined) {
      const { version, domains, skipped } = await ctx.sync.publish(yaml, 'PUT /v1/rules');
      subject.domains = domains;
      if (skipped.length > 0) ctx.logger.warn({ skipped }, 'stored rules documents that every node skips; push those domains again');
      sendJson(response, 200, { pushed: version, domains, version: ctx.holder.current.version, skipped, ...warned });
      return;
    }
    // No Redis: this node only.
    subject.domains = parsed.map((d) => d.domain);
    ctx.holder.replacePushed(ctx.holder.pushedRules().withDomains(compileRules(parsed, [yaml])));
    sendJson(response, 200, { domains: subject.domains, version: ctx.holder.current.version, ...warned });
  }), 'admin');
}

/** The rules shadowed by overrides, each marked with the overrides outranking it, and the overrides' sync. */
function overriddenRules(ctx: ServiceContext): Record<string, unknown> {
  const overridden = new Map<string, string[]>();
  for (const override of ctx.holder.overrides()) if (override.shadows !== null) overridden.set(override.shadows, [...(overridden.get(override.shadows) ?? []), override.id]);
  return {
    overridden: [...overridden].map(([rule, ids]) => ({ rule, overridden_by: ids })),
    ...(ctx.overrides !== undefined ? { overrides: ctx.overrides.status() } : {}),
  };
}

/** Inspecting, resetting and blocking keys (admin). */
function addKeyRoutes(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/keys', adminRoute(ctx, undefined, async (_request, response, url) => {
    const { key, policy } = keyQuery(url());
    const decision = await ctx.limiter.peek(key, policy);
    sendJson(response, 200, { key, decision });
  }), 'admin');

  routes.add('GET', '/v1/keys/blocked', adminRoute(ctx, undefined, (_request, response) => {
    sendJson(response, 200, { blocked: ctx.blocks.list() });
  }), 'admin');

  routes.add('POST', '/v1/keys/block', adminRoute(ctx, 'keys.block', async (request, response, _url, subject) => {
    const body = (await readJson(request)) as { key?: unknown; ttlMs?: unknown; domain?: unknown } | null;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(400, `the body must be { key, ttlMs?, domain? }, got ${describeValue(body)}`);
    const key = body.key as string;
    if (typeof key === 'string') subject.key = key;
    // A block names its domain, or applies to all of them ("*", the default).
    const domain = blockScope(body.domain);
    subject.domains = [domain];
    const until = ctx.blocks.block(key, body.ttlMs === undefined ? 3_600_000 : (body.ttlMs as number), ctx.clock(), domain);
    sendJson(response, 200, { key, domain, blockedUntil: until });
  }), 'admin');

  routes.add('DELETE', '/v1/keys/block', adminRoute(ctx, 'keys.unblock', (_request, response, url, subject) => {
    const key = url().searchParams.get('key');
    if (key === null) throw new HttpError(400, 'give the key to unblock: ?key=... (and &domain=... for a block of one domain)');
    subject.key = key;
    const domain = blockScope(url().searchParams.get('domain') ?? undefined);
    subject.domains = [domain];
    sendJson(response, 200, { key, domain, unblocked: ctx.blocks.unblock(key, domain) });
  }), 'admin');

  routes.add('DELETE', '/v1/keys', adminRoute(ctx, 'keys.reset', async (_request, response, url, subject) => {
    const { key, policy } = keyQuery(url());
    subject.key = key;
    await ctx.limiter.reset(key, policy);
    sendJson(response, 200, { key, reset: true });
  }), 'admin');
}



function keyQuery(url: URL): { key: string; policy: CompiledPolicy } {
  const key = url.searchParams.get('key');
  const algorithm = url.searchParams.get('algorithm');
  const limit = url.searchParams.get('limit');
  const window = url.searchParams.get('window');
  if (key === null || algorithm === null || limit === null || window === null) {
    throw new HttpError(400, 'give key, algorithm, limit and window as query parameters, e.g. ?key=user:42&algorithm=token-bucket&limit=10&window=1s');
  }
  // precision (sliding-window's buckets) is optional: compilePolicy refuses what is not a number in range.
  const precision = url.searchParams.get('precision');
  const buckets = precision === null ? {} : { precision: /^\d+$/.test(precision) ? Number(precision) : (precision as unknown as number) };
  // timeZone (a calendar window's, window=month) is optional too: compilePolicy checks it.
  const timeZone = url.searchParams.get('timeZone');
  const zone = timeZone === null ? {} : { timeZone };
  return { key, policy: compilePolicy({ algorithm: algorithm as Policy['algorithm'], limit: Number(limit), window: /^\d+$/.test(window) ? Number(window) : window, ...buckets, ...zone }) };
}
