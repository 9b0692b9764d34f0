/**
 * Sliding window counter with precision N > 1 (docs/semantics.md, "sliding-window with precision
 * N"): the window is counted in N buckets of W / N ms, and the estimate of the rolling window is
 * the N newest buckets whole plus the bucket before them weighted by the share of it still inside.
 * Precision 1 is the two-window counter of sliding-window.ts, which keeps its own state layout.
 *
 * Time is scaled by N so that a bucket is exactly W units long whatever W and N are: the instant
 * t ms is the scaled instant t × N, in bucket ⌊t × N / W⌋ at offset (t × N) mod W.
 *
 * State (N + 2 doubles): [0] the newest bucket's index, then its count and the N older buckets'
 * counts, newest first ([1 + k] counts bucket index − k). All zeros is the fresh state.
 */
import type { Decision } from '../decision.js';
import { POLICY_RANGES, type CompiledPolicy } from '../policy.js';
import { ceilDiv, floorDiv, mulDivmod } from './integer.js';
import { impossible, outcome } from './outcome.js';

const INDEX = 0;
const COUNTS = 1;

/**
 * The counts as they stand at the decision's bucket, newest first: the stored counts moved by the
 * buckets the window slid since. Reused by every decision (decisions are synchronous), so the hot
 * path allocates nothing.
 */
const counts = new Float64Array(POLICY_RANGES.precision.max + 1);

/** Doubles of state a key of this policy needs. */
export function bucketStateSize(policy: CompiledPolicy): number {
  return policy.precision + 2;
}

/**
 * Decides one request on `state[at .. at + N + 2)`; writes the next state there only when `commit`
 * is true and the request is admitted.
 */
export function decideSlidingBuckets(state: Float64Array, at: number, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  const { windowMs, capacity, precision } = policy;
  // t × N fits a double exactly for any real clock (2^53 / 100 ms is 2.8 millennia): no array to allocate.
  const scaled = now * precision;
  let bucket: number;
  let offset: number;
  if (scaled <= Number.MAX_SAFE_INTEGER) {
    bucket = floorDiv(scaled, windowMs);
    offset = scaled - bucket * windowMs;
  } else {
    [bucket, offset] = mulDivmod(now, precision, windowMs);
  }
  const storedBucket = state[at + INDEX]!;
  if (storedBucket > bucket) {
    // The clock went back: keep counting in the later bucket, as if at its very start.
    bucket = storedBucket;
    offset = 0;
  }
  // The window slid this many buckets since the state was written: stored position k is k + slid now.
  const slid = bucket - storedBucket;
  let whole = 0;
  for (let position = 0; position <= precision; position++) {
    const count = position >= slid ? state[at + COUNTS + position - slid]! : 0;
    counts[position] = count;
    if (position < precision) whole += count;
  }
  const estimate = whole + weigh(counts[precision]!, windowMs - offset, policy);

  if (cost > capacity) return impossible(policy, now, capacity - estimate, resetTime(now, bucket, policy));
  if (estimate + cost > capacity) {
    const retryAfter = retryInstant(bucket, offset, policy, cost, whole) - now;
    return outcome(policy, now, false, capacity - estimate, resetTime(now, bucket, policy), retryAfter);
  }
  counts[0] = counts[0]! + cost;
  if (commit) {
    state[at + INDEX] = bucket;
    for (let position = 0; position <= precision; position++) state[at + COUNTS + position] = counts[position]!;
  }
  return outcome(policy, now, true, capacity - estimate - cost, resetTime(now, bucket, policy), 0);
}

/** ⌊count × inside / W⌋: the part of the oldest bucket's count still inside the rolling window. */
function weigh(count: number, inside: number, policy: CompiledPolicy): number {
  if (count === 0) return 0;
  return policy.wide ? mulDivmod(count, inside, policy.windowMs)[0] : floorDiv(count * inside, policy.windowMs);
}

/** The first whole ms at or after scaled offset `offset` (0 ≤ offset ≤ W) into bucket `bucket`: ⌈(bucket × W + offset) / N⌉. */
function firstInstant(bucket: number, offset: number, policy: CompiledPolicy): number {
  const scaled = bucket * policy.windowMs;
  if (scaled <= Number.MAX_SAFE_INTEGER - policy.windowMs) return ceilDiv(scaled + offset, policy.precision);
  const [quotient, remainder] = mulDivmod(bucket, policy.windowMs, policy.precision);
  return quotient + ceilDiv(remainder + offset, policy.precision);
}

/**
 * When the estimate of {@link counts} has decayed to 0 (rounded down): the newest bucket with a
 * count `a` weighs nothing once it is the weighted one (N buckets later) and a × (W − offset) < W.
 */
function resetTime(now: number, bucket: number, policy: CompiledPolicy): number {
  const { windowMs, precision } = policy;
  for (let position = 0; position <= precision; position++) {
    const count = counts[position]!;
    if (count === 0) continue;
    const reset = firstInstant(bucket - position + precision, windowMs - floorDiv(windowMs - 1, count), policy);
    return reset > now ? reset : now;
  }
  return now;
}

/**
 * The first instant at which ⌊estimate⌋ + cost ≤ capacity (denied now; cost ≤ capacity), bucket by
 * bucket from the current one: `later` buckets on, the whole buckets have lost the `later` oldest
 * counts and the weighted one is the count `later` positions newer. The estimate never grows while
 * nothing is admitted, so the first instant that fits is enough for good.
 */
function retryInstant(bucket: number, offset: number, policy: CompiledPolicy, cost: number, whole: number): number {
  const { windowMs, capacity, precision, wide } = policy;
  let inWindow = whole;
  for (let later = 0; later <= precision; later++) {
    const weighted = counts[precision - later]!;
    if (later > 0) inWindow -= weighted;
    const room = capacity - cost - inWindow;
    if (room < 0) continue;
    // The least offset at which ⌊weighted × (W − offset) / W⌋ ≤ room. Past room, room + 1 ≤ weighted
    // keeps ⌊((room + 1) × W − 1) / weighted⌋ at most W (and within mulDivmod's range when wide).
    // In the current bucket a denial puts it past the current offset.
    let least = 0;
    if (weighted > room) least = windowMs - (wide ? floorOfProductLessOne(room + 1, windowMs, weighted) : floorDiv((room + 1) * windowMs - 1, weighted));
    if (least >= windowMs) continue;
    const instant = firstInstant(bucket + later, least, policy);
    // A whole ms past the bucket's end falls in the next bucket, where the next round decides.
    if (instant < firstInstant(bucket + later + 1, 0, policy)) return instant;
  }
  return firstInstant(bucket + precision + 1, 0, policy);
}

/** ⌊(a × b − 1) / m⌋ for a, b ≥ 1, with a quotient below 2^53. */
function floorOfProductLessOne(a: number, b: number, m: number): number {
  const [quotient, remainder] = mulDivmod(a, b, m);
  return remainder > 0 ? quotient : quotient - 1;
}
