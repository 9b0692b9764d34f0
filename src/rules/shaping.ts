/**
 * Shaping a check (the gateway's `shaping.max_delay`): a leaky-bucket limit whose queue is cut to
 * what drains within the longest wait, so a request that would wait longer is refused instead of
 * held (policy.ts `shapedLeakyBucket`, which the middleware's shaping uses too).
 */
import { shapedLeakyBucket } from '../policy.js';
import type { CompiledRule } from './ruleset.js';

/** Per rule, the shaped copy for the last `maxDelayMs` asked (a route's is fixed, so this is a one-entry cache). */
const shapedRules = new WeakMap<CompiledRule, { readonly maxDelayMs: number; readonly rule: CompiledRule }>();

/**
 * `rule` with its leaky bucket holding at most ⌊maxDelayMs / interval⌋ + 1 requests (the interval
 * being window / limit), or `rule` itself when it is not a leaky bucket or already that small. The
 * counters stay the rule's: state is kept per key, algorithm and window, whatever the burst.
 */
export function shapedRule(rule: CompiledRule, maxDelayMs: number): CompiledRule {
  const { policy } = rule;
  if (policy.algorithm !== 'leaky-bucket' || policy.limit === 0) return rule;
  const cached = shapedRules.get(rule);
  if (cached !== undefined && cached.maxDelayMs === maxDelayMs) return cached.rule;
  const cut = shapedLeakyBucket(policy, maxDelayMs);
  const shaped = cut === undefined ? rule : { ...rule, policy: cut };
  shapedRules.set(rule, { maxDelayMs, rule: shaped });
  return shaped;
}
