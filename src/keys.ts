/**
 * Limits on rate-limit keys. A module of its own, below the limiter, so that code which builds keys
 * (the HTTP identities) can respect them without importing the limiter.
 */

/** Longest key accepted, in UTF-8 bytes. Longer keys are rejected (not hashed): see docs/errors.md. */
export const MAX_KEY_BYTES = 1024;
