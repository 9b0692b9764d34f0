/**
 * One check as the service answers it, over HTTP or gRPC: blocked entries first (denied without
 * touching the store), then the limiter, then an event for metrics and the dashboard.
 */
import type { CheckRequest, CheckResult, DescriptorStatus } from '../rules/check.js';
import type { ServiceContext } from './context.js';

export async function decideCheck(ctx: ServiceContext, request: CheckRequest, via: 'json' | 'check' | 'grpc'): Promise<CheckResult> {
  const started = performance.now();
  const { quotaMode, shadowMode } = ctx.options;
  const result = blockedResult(ctx, request) ?? (await ctx.limiter.check(request, quotaMode || shadowMode ? { quotaMode, shadowMode } : undefined));
  try {
    ctx.events.emit('check', {
      domain: request.domain,
      result,
      keys: result.statuses.map((status) => status.key ?? status.rule),
      via,
      durationMs: performance.now() - started,
    });
  } catch (error) {
    // A failing listener (metrics, dashboard) must never fail the decision.
    ctx.logger.error({ err: error }, 'a check listener failed');
  }
  return result;
}

/** The answer when an entry of the request is blocked: every blocked descriptor over limit. */
function blockedResult(ctx: ServiceContext, request: CheckRequest): CheckResult | undefined {
  if (ctx.blocks.size === 0 || !Array.isArray(request.descriptors)) return undefined;
  const now = ctx.clock();
  let blocked = false;
  const statuses = request.descriptors.map((descriptor): DescriptorStatus => {
    let longest = 0;
    for (const entry of Array.isArray(descriptor?.entries) ? descriptor.entries : []) {
      longest = Math.max(longest, ctx.blocks.remaining(`${entry?.key}=${entry?.value}`, now));
    }
    if (longest === 0) return { code: 'OK', limitRemaining: 0, durationUntilReset: 0 };
    blocked = true;
    return { code: 'OVER_LIMIT', limitRemaining: 0, durationUntilReset: longest, rule: 'blocked' };
  });
  return blocked ? { overallCode: 'OVER_LIMIT', statuses, now } : undefined;
}
