/**
 * Pushed rules that deny everything: a limit of `requests_per_unit: 0` on a descriptor whose
 * entries name no value matches every request carrying those keys, and refuses them all. That is
 * seldom meant (a block is usually of one value), so a push holding one is answered with a
 * warning naming it, and the warning is logged (docs/service.md, "PUT /v1/rules").
 */
import type { DescriptorConfig, DomainConfig } from '../../rules/types.js';

/** A warning per limit of 0 that matches every value of its keys, e.g. `api: user (PUT /v1/rules:3:5) denies every request with user`. */
export function denyAllWarnings(domains: readonly DomainConfig[]): string[] {
  const warnings: string[] = [];
  const walk = (domain: string, descriptors: readonly DescriptorConfig[], keys: readonly string[]): void => {
    for (const descriptor of descriptors) {
      // An entry with a value narrows the match to that value: not a catch-all.
      if (descriptor.value !== undefined) continue;
      const path = [...keys, descriptor.key];
      const limit = descriptor.rateLimit;
      if (limit !== undefined && limit.requestsPerUnit === 0 && !limit.unlimited && !descriptor.shadowMode) {
        const { file, line, column } = limit.location;
        warnings.push(`${domain}: ${path.join(' > ')} (${file}:${line}:${column}) has requests_per_unit: 0 and no value: it denies every request with ${path.join(', ')}`);
      }
      walk(domain, descriptor.descriptors, path);
    }
  };
  for (const domain of domains) walk(domain.domain, domain.descriptors, []);
  return warnings;
}
