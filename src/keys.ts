/**
 * Limits on rate-limit keys. A module of its own, below the limiter, so that code which builds keys
 * (the HTTP identities) can respect them without importing the limiter.
 */

/** Longest key accepted, in UTF-8 bytes. Longer keys are rejected (not hashed): see docs/errors.md. */
export const MAX_KEY_BYTES = 1024;

/** `String.prototype.isWellFormed` / `toWellFormed` (ES2024, in Node since 20.0; not in the ES2023 lib we compile against). */
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/**
 * The key as every store counts it: each lone surrogate (half of a UTF-16 pair, without its other
 * half) becomes U+FFFD, which is what Redis receives anyway once the key is encoded as UTF-8. So
 * `'\uD800a'` and `'\uDBFFa'` are one counter in memory as on Redis. A well-formed key (nearly
 * all) is returned as it is: `isWellFormed` answers a one-byte (Latin-1) string without scanning
 * it, about 3 ns, and nothing is allocated.
 */
export function wellFormedKey(key: string): string {
  return (key as unknown as WellFormedString).isWellFormed() ? key : (key as unknown as WellFormedString).toWellFormed();
}
