/**
 * The usage of descriptors under rules: each descriptor is matched as `check` matches it (the same
 * rule, the same counter), and the limit it reaches is read with `limiter.usage` — a look, nothing
 * spent. What the service's `GET /v1/usage` and `tollgate usage` answer.
 */
import { InvalidCheckError, describeValue } from '../errors.js';
import type { LimiterCore, Usage } from '../limiter/index.js';
import { MAX_DESCRIPTORS, MAX_ENTRIES } from './check-types.js';
import { matchDescriptor, type DescriptorEntry } from './match.js';
import type { RuleSet } from './ruleset.js';

/** Whose usage to read: descriptors of one domain, as `check` takes them (no hits, no overrides). */
export interface UsageRequest {
  readonly domain: string;
  readonly descriptors: readonly (readonly DescriptorEntry[])[];
  /** The instant to read at (epoch ms); default the limiter's clock or the store's time. */
  readonly now?: number;
}

/** One descriptor's usage: the rule it reached and the usage of its counter. */
export type DescriptorUsage =
  /** No rule applies to the descriptor. */
  | { readonly entries: readonly DescriptorEntry[]; readonly rule: null }
  /** The rule is `unlimited`: nothing is counted. */
  | { readonly entries: readonly DescriptorEntry[]; readonly rule: string; readonly name?: string; readonly unlimited: true }
  | ({ readonly entries: readonly DescriptorEntry[]; readonly rule: string; readonly name?: string; readonly key: string } & Usage);

/**
 * The usage of each descriptor of `request`, in order, under `rules`; undefined when the domain has
 * no rules. Bad input is an InvalidCheckError.
 */
export async function descriptorUsage(limiter: LimiterCore, rules: RuleSet, request: UsageRequest): Promise<DescriptorUsage[] | undefined> {
  checkUsageRequest(request);
  const root = rules.domain(request.domain);
  if (root === undefined) return undefined;
  const at = request.now === undefined ? undefined : { now: request.now };
  return Promise.all(
    request.descriptors.map(async (entries): Promise<DescriptorUsage> => {
      const match = matchDescriptor(root, request.domain, entries);
      if (match === undefined) return { entries, rule: null };
      const { rule, counterKey } = match;
      const named = rule.name === undefined ? {} : { name: rule.name };
      if (rule.unlimited) return { entries, rule: rule.path, ...named, unlimited: true };
      return { entries, rule: rule.path, ...named, key: counterKey, ...(await limiter.usage(counterKey, rule.policy, at)) };
    }),
  );
}

function checkUsageRequest(request: UsageRequest): void {
  if (typeof request !== 'object' || request === null || typeof request.domain !== 'string' || request.domain === '') {
    throw new InvalidCheckError(`usage takes { domain: non-empty string, descriptors: [[{ key, value }]] }, got ${describeValue(request)}`);
  }
  const { descriptors } = request;
  if (!Array.isArray(descriptors) || descriptors.length === 0 || descriptors.length > MAX_DESCRIPTORS) {
    throw new InvalidCheckError(`usage needs 1 to ${MAX_DESCRIPTORS} descriptors, got ${describeValue(descriptors)}`);
  }
  descriptors.forEach((entries: unknown, i) => {
    if (!Array.isArray(entries) || entries.length === 0 || entries.length > MAX_ENTRIES) {
      throw new InvalidCheckError(`descriptors[${i}] must hold 1 to ${MAX_ENTRIES} entries { key, value }, got ${describeValue(entries)}`);
    }
    entries.forEach((entry: Partial<DescriptorEntry> | null, j) => {
      if (typeof entry !== 'object' || entry === null || typeof entry.key !== 'string' || entry.key === '' || typeof entry.value !== 'string') {
        throw new InvalidCheckError(`descriptors[${i}][${j}] must be { key: non-empty string, value: string }, got ${describeValue(entry)}`);
      }
    });
  });
}
