/**
 * A check's answer from its domain's allow or deny list (lists.ts), before any limit: the matching
 * descriptor's status names the list in its rule (`<domain>.deny.<key>`) and carries `list`, the
 * others are statuses of no limit. A deny is OVER_LIMIT (HTTP 429), as envoy's protocol has no
 * other refusal; in shadow mode it is reported, not enforced, as a limit's would be.
 */
import type { CheckOptions, CheckRequest, CheckResult, DescriptorStatus } from './check-types.js';
import { UNLIMITED_REMAINING } from './check-types.js';
import type { DomainLists } from './lists.js';

const NOT_LISTED: DescriptorStatus = Object.freeze({ code: 'OK', limitRemaining: 0, durationUntilReset: 0 });

/** What `lists` answer to `request`, or undefined when it is on neither list: the limits decide. */
export function listAnswer(lists: DomainLists, request: CheckRequest, clock: () => number, options: CheckOptions): CheckResult | undefined {
  const found = lists.match(request);
  if (found === undefined) return undefined;
  const denied = found.list === 'deny';
  const listed: DescriptorStatus = {
    code: denied ? 'OVER_LIMIT' : 'OK',
    limitRemaining: denied ? 0 : UNLIMITED_REMAINING,
    durationUntilReset: 0,
    rule: `${lists.domain}.${found.list}.${found.key}`,
    list: found.list,
  };
  const statuses = request.descriptors.map((_, i) => (i === found.index ? listed : NOT_LISTED));
  return { overallCode: denied && options.shadowMode !== true ? 'OVER_LIMIT' : 'OK', statuses, now: request.now ?? clock() };
}
