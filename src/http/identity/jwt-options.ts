/**
 * jwtIdentity's options, checked once at startup so that a bad secret, key, URL or algorithm list
 * fails when the application starts, naming what to write instead, and never on a request.
 */
import { KeyObject, createPublicKey, webcrypto, type JsonWebKey } from 'node:crypto';
import { currentTime } from '../../clock.js';
import { InvalidOptionError, describeValue } from '../../errors.js';
import { checkWholeNumber } from '../../options.js';
import { checkOptions, credentialReader, type CredentialReader } from './credentials.js';

export interface JwtOptions {
  /** Claim naming the user (default 'sub'); must be a non-empty string or a number in the token. */
  readonly claim?: string;
  /**
   * Exactly one of: an HMAC secret (string or Uint8Array), a public key (PEM string for SPKI or an
   * X.509 certificate, a public JWK object, or a KeyObject/CryptoKey), or a JWKS URL.
   */
  readonly secret?: string | Uint8Array;
  readonly publicKey?: string | object;
  readonly jwksUrl?: string;
  /**
   * Allowed algorithms (required with publicKey/jwksUrl; default ['HS256','HS384','HS512'] with
   * secret). Never 'none'; HMAC only with a secret, so a public key can never be used as an HMAC
   * secret.
   */
  readonly algorithms?: readonly string[];
  /** Accepted `iss` values; when given, a token without one of them is refused. */
  readonly issuer?: string | readonly string[];
  /** Accepted `aud` values; when given, a token without one of them is refused. */
  readonly audience?: string | readonly string[];
  /** Header (default 'authorization'). */
  readonly header?: string;
  /** Scheme before the token (default 'Bearer' for the authorization header, none for others). */
  readonly scheme?: string;
  /** Clock, epoch milliseconds (default: the process clock): for checking exp/nbf and the cache. */
  readonly now?: () => number;
  /** Verified tokens remembered (default 10,000; 0 turns the cache off). */
  readonly cacheSize?: number;
  /**
   * Called with errors that are not the token's fault: the JWKS URL unreachable or serving
   * garbage, a key jose refuses. The request still gets undefined. Token faults are not reported.
   */
  readonly onError?: (error: unknown) => void;
  /**
   * Longest token looked at, in characters (default 8,192, as {@link MAX_JWT_LENGTH}; 64 to
   * 1,048,576). A longer one is not verified: the request has no identity from it, and
   * `onTooLong` is told. Raise it when your tokens carry many claims; a cap bounds what one
   * request can make the verifier parse.
   */
  readonly maxLength?: number;
  /** Called with the length of each token refused for `maxLength`: count it in a metric, so an identity that vanished is seen. */
  readonly onTooLong?: (length: number) => void;
}

/** The default of {@link JwtOptions.maxLength}. */
export const MAX_JWT_LENGTH = 8192;

const JWT_OPTIONS = new Set(['claim', 'secret', 'publicKey', 'jwksUrl', 'algorithms', 'issuer', 'audience', 'header', 'scheme', 'now', 'cacheSize', 'onError', 'maxLength', 'onTooLong']);
const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'];
const PUBLIC_KEY_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** The function whose options these are, as error messages name it. */
const where = 'jwtIdentity';

/** {@link JwtOptions} checked, with their defaults filled in. */
export interface JwtSettings {
  readonly reader: CredentialReader;
  readonly claim: string;
  readonly algorithms: string[];
  /** The HMAC secret or public key; undefined with a JWKS URL, whose key set is made on the first token. */
  readonly key: Uint8Array | KeyObject | undefined;
  readonly jwksUrl: URL | undefined;
  readonly issuer: string[] | undefined;
  readonly audience: string[] | undefined;
  readonly now: () => number;
  readonly cacheSize: number;
  readonly onError: ((error: unknown) => void) | undefined;
  readonly maxLength: number;
  readonly onTooLong: ((length: number) => void) | undefined;
}

/** Checks `options` in the order they are documented; throws {@link InvalidOptionError} at the first fault. */
export function jwtSettings(options: JwtOptions): JwtSettings {
  checkOptions(where, options, JWT_OPTIONS, "{ secret: process.env.JWT_SECRET }");
  const reader = credentialReader(where, options.header, options.scheme, 'authorization');
  const claim = options.claim ?? 'sub';
  if (typeof claim !== 'string' || claim === '') {
    throw new InvalidOptionError(`${where}: claim must be the name of a claim such as 'sub' or 'user_id', got ${describeValue(options.claim)}`);
  }
  const { algorithms, key, jwksUrl } = verification(options);
  const issuer = stringList('issuer', options.issuer);
  const audience = stringList('audience', options.audience);
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidOptionError(`${where}: now must be a function returning epoch ms, got ${describeValue(options.now)}`);
  }
  const cacheSize = checkWholeNumber(options.cacheSize ?? 10_000, { name: `${where}: cacheSize`, min: 0, meaning: 'verified tokens remembered; 0 turns the cache off' });
  if (options.onError !== undefined && typeof options.onError !== 'function') {
    throw new InvalidOptionError(`${where}: onError must be a function, got ${describeValue(options.onError)}`);
  }
  const maxLength = checkWholeNumber(options.maxLength ?? MAX_JWT_LENGTH, { name: `${where}: maxLength`, min: 64, max: 1_048_576, unit: 'characters' });
  if (options.onTooLong !== undefined && typeof options.onTooLong !== 'function') {
    throw new InvalidOptionError(`${where}: onTooLong must be a function, got ${describeValue(options.onTooLong)}`);
  }
  return { reader, claim, algorithms, key, jwksUrl, issuer, audience, now: options.now ?? currentTime, cacheSize, onError: options.onError, maxLength, onTooLong: options.onTooLong };
}

type Verification = Pick<JwtSettings, 'algorithms' | 'key' | 'jwksUrl'>;

/** Exactly one of secret, publicKey and jwksUrl, and algorithms that it can verify. */
function verification(options: JwtOptions): Verification {
  const sources = (['secret', 'publicKey', 'jwksUrl'] as const).filter((name) => options[name] !== undefined);
  if (sources.length !== 1) {
    throw new InvalidOptionError(
      `${where}: give exactly one of secret (HMAC), publicKey (PEM, JWK or KeyObject) or jwksUrl, got ${sources.length === 0 ? 'none' : sources.join(' and ')}`,
    );
  }
  const algorithms = options.algorithms;
  if (algorithms !== undefined && (!Array.isArray(algorithms) || algorithms.length === 0 || !algorithms.every((name) => typeof name === 'string'))) {
    throw new InvalidOptionError(`${where}: algorithms must be a non-empty array such as ['RS256'], got ${describeValue(algorithms)}`);
  }
  for (const name of algorithms ?? []) {
    if (name.toLowerCase() === 'none') {
      throw new InvalidOptionError(`${where}: algorithms must not contain ${JSON.stringify(name)}: an unsigned token proves nothing; list signing algorithms such as 'RS256'`);
    }
  }
  if (sources[0] === 'secret') return secretVerification(options.secret, algorithms);
  if (algorithms === undefined) {
    throw new InvalidOptionError(`${where}: with ${sources[0]}, list the algorithms your tokens are signed with, e.g. algorithms: ['RS256']`);
  }
  const listed = [...algorithms];
  const wrong = listed.filter((name) => !PUBLIC_KEY_ALGORITHMS.includes(name));
  if (wrong.length > 0) {
    throw new InvalidOptionError(
      `${where}: with ${sources[0]}, algorithms must be among ${PUBLIC_KEY_ALGORITHMS.join(', ')}, got ${wrong.join(', ')}` +
        (wrong.some((name) => HMAC_ALGORITHMS.includes(name)) ? '; HMAC tokens need secret instead' : ''),
    );
  }
  if (sources[0] === 'publicKey') return { algorithms: listed, key: publicKeyFor(options.publicKey, listed), jwksUrl: undefined };
  return { algorithms: listed, key: undefined, jwksUrl: parseJwksUrl(options.jwksUrl) };
}

/** An HMAC secret, with HMAC algorithms only (all three by default). */
function secretVerification(secret: JwtOptions['secret'], algorithms: readonly string[] | undefined): Verification {
  if (!(typeof secret === 'string' || secret instanceof Uint8Array) || secret.length === 0) {
    throw new InvalidOptionError(`${where}: secret must be a non-empty string or Uint8Array (the HMAC key), got ${describeValue(secret)}`);
  }
  const listed = [...(algorithms ?? HMAC_ALGORITHMS)];
  const wrong = listed.filter((name) => !HMAC_ALGORITHMS.includes(name));
  if (wrong.length > 0) {
    throw new InvalidOptionError(`${where}: with a secret, algorithms must be among ${HMAC_ALGORITHMS.join(', ')}, got ${wrong.join(', ')}; for RS256/ES256 tokens give publicKey or jwksUrl`);
  }
  const key = typeof secret === 'string' ? new TextEncoder().encode(secret) : new Uint8Array(secret);
  return { algorithms: listed, key, jwksUrl: undefined };
}

/** The public key, which must be able to verify every algorithm listed. */
function publicKeyFor(value: unknown, algorithms: readonly string[]): KeyObject {
  const key = publicKeyObject(value);
  const usable = algorithmsForKey(key);
  const unusable = algorithms.filter((name) => !usable.includes(name));
  if (unusable.length > 0) {
    throw new InvalidOptionError(
      `${where}: the publicKey (${key.asymmetricKeyType ?? 'unknown type'}) cannot verify ${unusable.join(', ')}; ` +
        (usable.length > 0 ? `it can verify ${usable.join(', ')}` : 'use an RSA, EC (P-256, P-384, P-521) or Ed25519 key'),
    );
  }
  return key;
}

/** The JWKS URL, which must be http(s). */
function parseJwksUrl(url: unknown): URL {
  let parsed: URL | undefined;
  try {
    parsed = typeof url === 'string' ? new URL(url) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed === undefined || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
    throw new InvalidOptionError(`${where}: jwksUrl must be an http(s) URL such as 'https://issuer.example/.well-known/jwks.json', got ${describeValue(url)}`);
  }
  return parsed;
}

/** Algorithms each public key type can verify; EC keys by curve. */
function algorithmsForKey(key: KeyObject): readonly string[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss':
      return ['PS256', 'PS384', 'PS512'];
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      return curve === 'prime256v1' ? ['ES256'] : curve === 'secp384r1' ? ['ES384'] : curve === 'secp521r1' ? ['ES512'] : [];
    }
    case 'ed25519':
      return ['EdDSA', 'Ed25519'];
    default:
      return [];
  }
}

/** `issuer` or `audience`: one string or a non-empty array of them. */
function stringList(name: string, value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || list.length === 0 || !list.every((item) => typeof item === 'string' && item !== '')) {
    throw new InvalidOptionError(`${where}: ${name} must be a non-empty string or array of strings, got ${describeValue(value)}`);
  }
  return [...(list as string[])];
}

/** The public key as a KeyObject, checked now so a bad key fails at startup, not on the first request. */
function publicKeyObject(value: unknown): KeyObject {
  let key: KeyObject;
  try {
    if (typeof value === 'string') {
      if (value.includes('PRIVATE KEY')) {
        throw new InvalidOptionError(`${where}: publicKey is a private key; give the public key (-----BEGIN PUBLIC KEY-----), the private key stays with the issuer`);
      }
      if (!value.includes('-----BEGIN ')) {
        throw new InvalidOptionError(`${where}: publicKey as a string must be PEM (-----BEGIN PUBLIC KEY----- or a certificate); for a JWK give the object`);
      }
      key = createPublicKey(value);
    } else if (value instanceof KeyObject) {
      key = value;
    } else if (typeof value === 'object' && value !== null && Object.prototype.toString.call(value) === '[object CryptoKey]') {
      // Node 20 has no CryptoKey class to test with instanceof; its instances carry the tag.
      key = KeyObject.from(value as webcrypto.CryptoKey);
    } else if (typeof value === 'object' && value !== null && typeof (value as { kty?: unknown }).kty === 'string') {
      const jwk = value as { kty: string; d?: unknown };
      if (jwk.d !== undefined) throw new InvalidOptionError(`${where}: publicKey is a private JWK (it has "d"); give the public key only`);
      if (jwk.kty === 'oct') throw new InvalidOptionError(`${where}: publicKey is a symmetric JWK (kty "oct"); give it as secret instead`);
      key = createPublicKey({ key: value as JsonWebKey, format: 'jwk' });
    } else {
      throw new InvalidOptionError(`${where}: publicKey must be a PEM string, a public JWK object or a KeyObject/CryptoKey, got ${describeValue(value)}`);
    }
  } catch (error) {
    if (error instanceof InvalidOptionError) throw error;
    throw new InvalidOptionError(`${where}: publicKey cannot be read: ${(error as Error).message}`);
  }
  if (key.type !== 'public') {
    throw new InvalidOptionError(`${where}: publicKey must be a public key, got a ${key.type} key${key.type === 'secret' ? '; give it as secret instead' : ''}`);
  }
  return key;
}
