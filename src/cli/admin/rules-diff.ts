/**
 * Comparing rules as the service shows them: one `/rlconfig` line per limit (`domain.key_value:
 * unit=... requests_per_unit=..., shadow_mode: ..., algorithm: ...`), keyed by the part before `: `.
 * Both sides come from the same `RuleSet.dump`, so equal rules give equal lines.
 */

/** What pushing a domain would change. */
export interface DomainDiff {
  readonly domain: string;
  /** new: the service does not have the domain; changed: some limit differs. */
  readonly status: 'new' | 'changed' | 'unchanged';
  readonly added: readonly string[];
  readonly removed: readonly string[];
  readonly changed: readonly { readonly from: string; readonly to: string }[];
}

/**
 * A dump's lines grouped by domain. A line belongs to the longest domain name it starts with
 * (followed by `.` or `:`), so a domain `a` never takes the lines of a domain `a.b`.
 */
export function limitsByDomain(dump: string, domains: readonly string[]): Map<string, string[]> {
  const byLength = [...domains].sort((a, b) => b.length - a.length);
  const grouped = new Map<string, string[]>(domains.map((domain) => [domain, []]));
  for (const line of dump.split('\n')) {
    if (line === '') continue;
    const domain = byLength.find((name) => line.startsWith(`${name}.`) || line.startsWith(`${name}:`));
    if (domain !== undefined) grouped.get(domain)!.push(line);
  }
  return grouped;
}

/** The part of a line naming the limit (its descriptor path). */
function limitKey(line: string): string {
  const at = line.lastIndexOf(': unit=');
  return at === -1 ? line : line.slice(0, at);
}

/** From `current` (undefined: the domain is not in force) to `proposed`, limit by limit. */
export function diffDomain(domain: string, current: readonly string[] | undefined, proposed: readonly string[]): DomainDiff {
  const before = new Map((current ?? []).map((line) => [limitKey(line), line]));
  const after = new Map(proposed.map((line) => [limitKey(line), line]));
  const added: string[] = [];
  const changed: { from: string; to: string }[] = [];
  for (const [key, line] of after) {
    const old = before.get(key);
    if (old === undefined) added.push(line);
    else if (old !== line) changed.push({ from: old, to: line });
  }
  const removed = [...before].filter(([key]) => !after.has(key)).map(([, line]) => line);
  const status = current === undefined ? 'new' : added.length + removed.length + changed.length > 0 ? 'changed' : 'unchanged';
  return { domain, status, added, removed, changed };
}
