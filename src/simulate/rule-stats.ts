/**
 * What one run counts for one limit as the log is replayed: decisions, the busiest keys (by
 * requests and by throttled, Space-Saving), the timeline and, with a reference algorithm, the
 * decisions that differ from it. Memory is bounded: a fixed number of tracked keys and buckets.
 */
import type { DescriptorStatus } from '../rules/check.js';
import { HeavyHitters } from './heavy-hitters.js';
import type { LimitInfo } from './rules-for-run.js';
import { Timeline } from './timeline.js';
import type { RuleReport } from './types.js';

/** Bounds on what each limit keeps. */
export interface StatsBounds {
  /** Keys tracked by each busiest-keys list (Space-Saving capacity). */
  readonly trackedKeys: number;
  /** Keys reported by each list. */
  readonly topKeys: number;
  /** Distinct keys counted exactly up to this many (then reported as a lower bound). */
  readonly distinctKeys: number;
  readonly maxBuckets: number;
}

/** Whether a status says its limit was over (enforced, or reported over in shadow or quota mode). */
export function isOver(status: DescriptorStatus): boolean {
  return status.code === 'OVER_LIMIT' || status.shadowOverLimit === true || status.quotaOverLimit === true;
}

export class RuleStats {
  private requests = 0;
  private allowed = 0;
  private throttled = 0;
  private readonly distinct = new Set<string>();
  private readonly byRequests: HeavyHitters;
  private readonly byThrottled: HeavyHitters;
  private readonly timeline: Timeline;
  private difference: { compared: number; allowedOnlyHere: number; allowedOnlyByReference: number } | undefined;

  constructor(
    private readonly rule: string,
    private readonly info: LimitInfo,
    private readonly bounds: StatsBounds,
  ) {
    this.byRequests = new HeavyHitters(bounds.trackedKeys);
    this.byThrottled = new HeavyHitters(bounds.trackedKeys);
    this.timeline = new Timeline(bounds.maxBuckets);
  }

  /** Counts one decision of this limit on counter `key` at `now`; `reference` is the reference run's status. */
  record(key: string, over: boolean, now: number, reference: DescriptorStatus | undefined): void {
    this.requests += 1;
    if (over) this.throttled += 1;
    else this.allowed += 1;
    if (this.distinct.size < this.bounds.distinctKeys) this.distinct.add(key);
    this.byRequests.add(key);
    if (over) this.byThrottled.add(key);
    this.timeline.add(now, !over);
    if (reference !== undefined) {
      this.difference ??= { compared: 0, allowedOnlyHere: 0, allowedOnlyByReference: 0 };
      this.difference.compared += 1;
      const referenceOver = isOver(reference);
      if (!over && referenceOver) this.difference.allowedOnlyHere += 1;
      if (over && !referenceOver) this.difference.allowedOnlyByReference += 1;
    }
  }

  report(): RuleReport {
    const { domain, limit, algorithm, shadowMode } = this.info;
    return {
      rule: this.rule,
      domain,
      limit,
      algorithm,
      shadowMode,
      requests: this.requests,
      allowed: this.allowed,
      throttled: this.throttled,
      keys: this.distinct.size,
      topByRequests: this.byRequests.top(this.bounds.topKeys),
      topByThrottled: this.byThrottled.top(this.bounds.topKeys),
      timeline: this.timeline.report(),
      ...(this.difference === undefined ? {} : { difference: { ...this.difference } }),
    };
  }
}
