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
