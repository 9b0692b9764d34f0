/**
 * Exact integer division for values below 2^53. `Math.floor(a / b)` alone can round a quotient
 * just below an integer up to it, which would move a refill instant by a millisecond.
 */

/** ⌊a / b⌋ for integers a ≥ 0, b > 0. */
export function floorDiv(a: number, b: number): number {
  let quotient = Math.floor(a / b);
  if (quotient * b > a) quotient -= 1;
  else if ((quotient + 1) * b <= a) quotient += 1;
  return quotient;
}

/** ⌈a / b⌉ for integers a ≥ 0, b > 0. */
export function ceilDiv(a: number, b: number): number {
  const quotient = floorDiv(a, b);
  return quotient * b === a ? quotient : quotient + 1;
}

const TWO_53 = 9_007_199_254_740_992;

/**
 * (⌊a·b / m⌋, a·b mod m), exactly, for safe integers a, b ≥ 0 and 1 ≤ m < 2^52 whose quotient is
 * below 2^53, even when a·b itself is far beyond 2^53 (the wide policies' arithmetic,
 * docs/semantics.md). When a·b fits in 2^53 it is one division; otherwise a is reduced mod m and b
 * is fed in base-2^k digits (m·2^k ≤ 2^53), so every intermediate stays exact in a double.
 */
export function mulDivmod(a: number, b: number, m: number): [number, number] {
  const product = a * b;
  if (product <= Number.MAX_SAFE_INTEGER) {
    const quotient = floorDiv(product, m);
    return [quotient, product - quotient * m];
  }
  const high = floorDiv(a, m);
  const low = a - high * m;
  let k = 53 - Math.ceil(Math.log2(m + 1));
  while (m * 2 ** k > TWO_53) k -= 1;
  while (m * 2 ** (k + 1) <= TWO_53) k += 1;
  const base = 2 ** k;
  let place = 1;
  while (place * base <= b) place *= base;
  let quotient = 0;
  let remainder = 0;
  for (let rest = b; place >= 1; place /= base) {
    const digit = Math.floor(rest / place);
    rest -= digit * place;
    // (quotient, remainder) := value × base + low × digit, kept as a quotient and remainder by m.
    const shifted = remainder * base;
    const shiftedQuotient = floorDiv(shifted, m);
    const added = low * digit;
    const addedQuotient = floorDiv(added, m);
    quotient = quotient * base + shiftedQuotient + addedQuotient;
    remainder = shifted - shiftedQuotient * m + (added - addedQuotient * m);
    if (remainder >= m) {
      remainder -= m;
      quotient += 1;
    }
  }
  return [high * b + quotient, remainder];
}
