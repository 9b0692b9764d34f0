/** Identity from an API key, hashed so the raw key is never a store key. */
import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';
import { checkOptions, credentialReader, readCredential } from './credentials.js';
import type { HeaderGetter } from './text.js';

/** Longest API key hashed; a longer header is not a key. */
export const MAX_API_KEY_LENGTH = 4096;

export interface ApiKeyOptions {
  /** Header carrying the key (default 'x-api-key'). */
  readonly header?: string;
  /**
   * Authentication scheme stripped before the key (case-insensitive), e.g. 'Bearer'. Defaults to
   * 'Bearer' when `header` is 'authorization', to none otherwise. A header without it is no key.
   */
  readonly scheme?: string;
}

const API_KEY_OPTIONS = new Set(['header', 'scheme']);

/**
 * Identity from an API key: 'key:' + base64url of the first 16 bytes of SHA-256(key), so the raw
 * key never becomes a store key (nor appears in Redis or metrics). undefined when the header is
 * absent, empty or longer than 4096 characters.
 *
 * The key is not checked against anything: a client can invent any number of keys, so use this
 * for requests your application has already authenticated, or alongside a per-IP limit.
 */
export function apiKeyIdentity(options: ApiKeyOptions = {}): (header: HeaderGetter) => string | undefined {
  checkOptions('apiKeyIdentity', options, API_KEY_OPTIONS, "{ header: 'x-api-key' }");
  const reader = credentialReader('apiKeyIdentity', options.header, options.scheme, 'x-api-key');
  return (header) => {
    const key = readCredential(reader, header);
    if (key === undefined || key.length === 0 || key.length > MAX_API_KEY_LENGTH) return undefined;
    return 'key:' + digest16(key);
  };
}

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** `crypto.hash` (node ≥ 20.12) hashes in one call, a fifth of the cost of createHash(). */
const oneShotHash = (crypto as { hash?: typeof crypto.hash }).hash;

/** base64url of the first 16 bytes of SHA-256(text). */
function digest16(text: string): string {
  if (oneShotHash === undefined) return createHash('sha256').update(text).digest().subarray(0, 16).toString('base64url');
  // Of the full digest in base64url, characters 0..20 are bytes 0..15 but for byte 15's last two
  // bits, which character 21 holds in its top bits beside byte 16's first four: keep those two.
  const full = oneShotHash('sha256', text, 'base64url');
  return full.slice(0, 21) + BASE64URL[BASE64URL.indexOf(full[21]!) & 0x30];
}
