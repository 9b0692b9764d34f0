/**
 * `GET /v1/usage?domain=D&descriptor=k=v,k2=v2` on the admin listener: per descriptor (the
 * parameter may repeat), the rule it matches and what is used of that rule's quota over which
 * period — read through the limiter, nothing spent. Behind the admin token, like `GET /v1/keys`.
 */
import { descriptorUsage } from '../../rules/usage.js';
import type { DescriptorEntry } from '../../rules/match.js';
import { adminRoute } from './auth.js';
import type { ServiceContext } from '../context.js';
import type { HttpRoutes } from '../http/listener.js';
import { HttpError, sendJson } from '../http/body.js';

const EXAMPLE = '?domain=api&descriptor=org=acme,team=search';

/** Adds `GET /v1/usage` to the admin listener's table. */
export function addUsageRoute(ctx: ServiceContext, routes: HttpRoutes): void {
  routes.add('GET', '/v1/usage', adminRoute(ctx, undefined, async (_request, response, url) => {
    const query = url().searchParams;
    const domain = query.get('domain');
    if (domain === null || domain === '') throw new HttpError(400, `give the domain and at least one descriptor: ${EXAMPLE}`);
    const unknown = [...query.keys()].find((name) => name !== 'domain' && name !== 'descriptor');
    if (unknown !== undefined) throw new HttpError(400, `unknown query parameter ${JSON.stringify(unknown)}; the parameters are domain and descriptor (repeat it for several): ${EXAMPLE}`);
    const descriptors = query.getAll('descriptor').map(parseDescriptor);
    if (descriptors.length === 0) throw new HttpError(400, `give at least one descriptor as key=value pairs joined by commas: ${EXAMPLE}`);
    const usage = await descriptorUsage(ctx.limiter, ctx.holder.current, { domain, descriptors });
    if (usage === undefined) throw new HttpError(404, `no rules for domain ${JSON.stringify(domain)}; the domains are ${ctx.holder.current.domainNames().join(', ') || '(none)'}`);
    sendJson(response, 200, { domain, usage: usage.map(({ entries, ...rest }) => ({ descriptor: entries.map(({ key, value }) => `${key}=${value}`).join(','), ...rest })) });
  }), 'admin');
}

/** `k=v,k2=v2` as entries: each pair split at its first `=` (a value may hold `=`, not `,`). */
export function parseDescriptor(text: string): DescriptorEntry[] {
  return text.split(',').map((pair) => {
    const at = pair.indexOf('=');
    if (at <= 0) throw new HttpError(400, `descriptor ${JSON.stringify(text)}: each entry is key=value (a non-empty key), got ${JSON.stringify(pair)}; e.g. ${EXAMPLE}`);
    return { key: pair.slice(0, at), value: pair.slice(at + 1) };
  });
}
