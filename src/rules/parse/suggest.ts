/**
 * "Did you mean ...?" for rules files: finds the known word a misspelt one was probably meant to
 * be (`requests_per_units` → `requests_per_unit`, `ratelimit` → `rate_limit`, `Token_Bucket` →
 * `token-bucket`).
 */

/** Lowercase without separators, so `rateLimit`, `ratelimit` and `rate-limit` all read the same. */
function normalize(word: string): string {
  return word.toLowerCase().replace(/[-_\s]/g, '');
}

/** Edit distance (insertions, deletions, substitutions), giving up early past `max`. */
function editDistance(a: string, b: string, max: number): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const value = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      current.push(value);
      rowMin = Math.min(rowMin, value);
    }
    if (rowMin > max) return max + 1;
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * The candidate `word` most likely misspells, or undefined when none is close: same letters once
 * case and separators are ignored, or at most 2 edits away (1 for words of 4 letters or fewer).
 */
export function closestMatch(word: string, candidates: readonly string[]): string | undefined {
  const wanted = normalize(word);
  if (wanted === '' || word.length > 100) return undefined;
  const exact = candidates.find((candidate) => normalize(candidate) === wanted);
  if (exact !== undefined) return exact;
  const max = wanted.length <= 4 ? 1 : 2;
  let best: string | undefined;
  let bestDistance = max + 1;
  for (const candidate of candidates) {
    const distance = editDistance(wanted, normalize(candidate), max);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}
