/**
 * Identity from a JWT, verified with jose (loaded on the first token), and the bounded cache that
 * spares a hot token from being verified on every request.
 */
import type { KeyObject } from 'node:crypto';
import type * as Jose from 'jose';
import { MAX_KEY_BYTES } from '../../keys.js';
import { readCredential } from './credentials.js';
import { MAX_JWT_LENGTH, jwtSettings, type JwtOptions, type JwtSettings } from './jwt-options.js';
import { DOT, type HeaderGetter } from './text.js';

export { MAX_JWT_LENGTH };
/** A verified token without `exp` (or with a far one) is verified again after this long. */
export const MAX_JWT_CACHE_MS = 60_000;
/** jose error codes that mean "this token is no good", as opposed to "we could not check it". */
const TOKEN_FAULTS = new Set([
  'ERR_JWT_EXPIRED',
  'ERR_JWT_CLAIM_VALIDATION_FAILED',
  'ERR_JWT_INVALID',
  'ERR_JWS_INVALID',
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
]);

let josePromise: Promise<typeof Jose> | undefined;

/** jose is loaded on the first token, so applications without JWT identity never load it. */
function loadJose(): Promise<typeof Jose> {
  return (josePromise ??= import('jose'));
}

type VerifyKey = Uint8Array | KeyObject | ReturnType<typeof Jose.createRemoteJWKSet>;

interface CachedIdentity {
  readonly identity: string;
  readonly expiresAt: number;
}

/**
 * Identity from a JWT: 'user:' + the claim's value for a token that verifies (signature, exp/nbf,
 * iss, aud), otherwise undefined (absent, malformed, expired, bad signature): it never rejects on
 * request input. Verified tokens are cached (least recently used first out, `cacheSize` entries,
 * each until its `exp` and at most a minute) so a hot token is not verified on every request.
 */
export function jwtIdentity(options: JwtOptions): (header: HeaderGetter) => Promise<string | undefined> {
  const verifier = new JwtVerifier(jwtSettings(options));
  return (header) => verifier.identify(header);
}

class JwtVerifier {
  /** The secret or public key; with a JWKS URL, its remote key set once jose is loaded. */
  private key: VerifyKey | undefined;
  /** Token → identity; a Map iterates in insertion order, so its first key is the least recently used. */
  private readonly cache = new Map<string, CachedIdentity>();

  constructor(private readonly settings: JwtSettings) {
    this.key = settings.key;
  }

  identify(header: HeaderGetter): Promise<string | undefined> {
    const token = readCredential(this.settings.reader, header);
    if (token === undefined) return Promise.resolve(undefined);
    if (token.length > this.settings.maxLength) return this.tooLong(token.length);
    if (!looksLikeJws(token)) return Promise.resolve(undefined);
    const now = this.settings.now();
    const cached = this.cache.get(token);
    if (cached !== undefined) {
      this.cache.delete(token);
      if (now < cached.expiresAt) {
        this.cache.set(token, cached);
        return Promise.resolve(cached.identity);
      }
    }
    return this.verify(token, now);
  }

  /** A token over `maxLength`: no identity, and `onTooLong` told (a failing reporter does not fail the request). */
  private tooLong(length: number): Promise<undefined> {
    try {
      this.settings.onTooLong?.(length);
    } catch {
      // A failing reporter must not fail the request.
    }
    return Promise.resolve(undefined);
  }

  private async verify(token: string, now: number): Promise<string | undefined> {
    let payload: Jose.JWTPayload;
    try {
      const jose = await loadJose();
      const key = (this.key ??= jose.createRemoteJWKSet(this.settings.jwksUrl!));
      const options: Jose.JWTVerifyOptions = { algorithms: this.settings.algorithms, currentDate: new Date(now) };
      if (this.settings.issuer !== undefined) options.issuer = this.settings.issuer;
      if (this.settings.audience !== undefined) options.audience = this.settings.audience;
      payload = (typeof key === 'function' ? await jose.jwtVerify(token, key, options) : await jose.jwtVerify(token, key, options)).payload;
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (this.settings.onError !== undefined && !(typeof code === 'string' && TOKEN_FAULTS.has(code))) {
        try {
          this.settings.onError(error);
        } catch {
          // A failing reporter must not fail the request.
        }
      }
      return undefined;
    }
    const value = payload[this.settings.claim];
    if (!((typeof value === 'string' && value !== '') || (typeof value === 'number' && Number.isFinite(value)))) return undefined;
    const identity = 'user:' + value;
    if (identity.length > MAX_KEY_BYTES / 3 && Buffer.byteLength(identity) > MAX_KEY_BYTES) return undefined;
    if (this.settings.cacheSize > 0) {
      const expiresAt = Math.min(typeof payload.exp === 'number' ? payload.exp * 1000 : Infinity, now + MAX_JWT_CACHE_MS);
      this.cache.delete(token); // verified twice at once: one entry, and no needless eviction
      if (this.cache.size >= this.settings.cacheSize) this.cache.delete(this.cache.keys().next().value!);
      this.cache.set(token, { identity, expiresAt });
    }
    return identity;
  }
}

/** Three base64url segments (header and payload non-empty), cheap to check before any crypto. */
function looksLikeJws(token: string): boolean {
  let dots = 0;
  let segmentLength = 0;
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    if (c === DOT) {
      if (segmentLength === 0 || dots === 2) return false;
      dots++;
      segmentLength = 0;
    } else if ((c >= 48 && c <= 57) || ((c | 0x20) >= 97 && (c | 0x20) <= 122) || c === 45 || c === 95) {
      segmentLength++;
    } else {
      return false;
    }
  }
  return dots === 2;
}
