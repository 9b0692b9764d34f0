/**
 * Client identity: address parsing and IPv4-mapped folding, IPv6 subnet keys, the client behind
 * trusted proxies (X-Forwarded-For, Forwarded, X-Real-IP), hashed API keys, and JWTs verified with
 * a secret, a public key and a JWKS URL served by a real HTTP server.
 */
import { createHash, createPublicKey, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import fc from 'fast-check';
import { SignJWT, exportJWK, exportPKCS8, exportSPKI, generateKeyPair, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import {
  apiKeyIdentity,
  clientIp,
  jwtIdentity,
  normalizeIp,
  type ClientIp,
  type HeaderGetter,
  type JwtOptions,
} from '../../src/http/identity/index.js';

function headers(values: Record<string, string>): HeaderGetter {
  return (name) => values[name];
}
const noHeaders: HeaderGetter = () => undefined;

/** Canonical IPv6 by an independent implementation: the WHATWG URL host serializer (RFC 5952). */
function urlCanonical(address: string): string {
  return new URL(`http://[${address}]/`).hostname.slice(1, -1);
}

function fullForm(value: bigint): string {
  return value.toString(16).padStart(32, '0').match(/.{4}/g)!.join(':');
}

describe('normalizeIp', () => {
  const valid: [string, string][] = [
    ['1.2.3.4', '1.2.3.4'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['1.2.3.4:80', '1.2.3.4'],
    ['1.2.3.4:65535', '1.2.3.4'],
    ['::', '::'],
    ['::1', '::1'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['1:0:0:2:0:0:0:3', '1:0:0:2::3'],
    ['1::', '1::'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8'],
    ['[::1]', '::1'],
    ['[2001:db8::1]:4711', '2001:db8::1'],
    ['fe80::1%eth0', 'fe80::1'],
    ['[fe80::1%25eth0]:80', 'fe80::1'],
    ['::ffff:1.2.3.4', '1.2.3.4'],
    ['::FFFF:102:304', '1.2.3.4'],
    ['0:0:0:0:0:ffff:0102:0304', '1.2.3.4'],
    ['[::ffff:1.2.3.4]:80', '1.2.3.4'],
    ['::ffff:0:0', '0.0.0.0'],
    ['::1.2.3.4', '::102:304'],
    ['2001:db8::1.2.3.4', '2001:db8::102:304'],
    ['1:2:3:4:5:6:1.2.3.4', '1:2:3:4:5:6:102:304'],
    ['::fffe:1.2.3.4', '::fffe:102:304'],
    ['0:0:0:0:1:ffff:1.2.3.4', '::1:ffff:102:304'],
  ];
  it.each(valid)('%s → %s', (text, expected) => {
    expect(normalizeIp(text)).toBe(expected);
  });

  const invalid = [
    '',
    ' 1.2.3.4',
    '1.2.3.4 ',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '1.2.3.-4',
    '01.2.3.4',
    '1.2.3.010',
    '127.1',
    '2130706433',
    '0x7f.0.0.1',
    '1.2.3.4:',
    '1.2.3.4:65536',
    '1.2.3.4:8a',
    ':::',
    '1::2::3',
    ':1',
    '1:',
    '1:2:3:4:5:6:7:8:9',
    '1::2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7:8::',
    '12345::',
    'g::1',
    '1:2:3:4:5:6:7:1.2.3.4',
    '::1.2.3',
    '::ffff:01.2.3.4',
    '::1.2.3.4:5',
    '::1.2.3.4::',
    '[1.2.3.4]',
    '[::1',
    '[::1]:',
    '[::1]x',
    '::1]',
    'fe80::1%',
    'fe80::1%eth 0',
    '1.2.3.4%eth0',
    '::1/128',
    'unknown',
    'localhost',
    '_hidden',
    `::${'1:'.repeat(100)}1`,
  ];
  it.each(invalid)('%j is not an address', (text) => {
    expect(normalizeIp(text)).toBeUndefined();
  });

  it('agrees with net.isIP (plus v4:port) on which strings are addresses, and with the URL serializer on their form', () => {
    const piece = fc.oneof(
      fc.constant(''),
      fc.stringMatching(/^[0-9a-fA-F]{1,5}$/),
      fc.constantFrom('0', '00', '0000', 'ffff', 'FFFF', '1.2.3.4', '01.2.3.4', '255.255.255.255', '256.0.0.1'),
    );
    const candidate = fc.array(piece, { minLength: 1, maxLength: 10 }).map((parts) => parts.join(':'));
    fc.assert(
      fc.property(candidate, (text) => {
        const normalized = normalizeIp(text);
        const [host, port, ...rest] = text.split(':');
        const withPort = rest.length === 0 && isIP(host!) === 4 && /^\d{1,5}$/.test(port ?? '') && Number(port) <= 65535;
        expect(normalized !== undefined).toBe(isIP(text) !== 0 || withPort);
        if (normalized !== undefined && isIP(text) === 6 && isIP(normalized) === 6) expect(normalized).toBe(urlCanonical(text));
      }),
      { numRuns: 20_000 },
    );
  });

  it('prints every IPv6 address as RFC 5952 does, and folds exactly ::ffff:0:0/96 to IPv4', () => {
    const groups = fc.array(fc.oneof(fc.constant(0), fc.constant(0xffff), fc.integer({ min: 0, max: 0xffff })), { minLength: 8, maxLength: 8 });
    fc.assert(
      fc.property(groups, fc.boolean(), (values, upper) => {
        const text = values.map((value) => value.toString(16).padStart(upper ? 4 : 1, '0')).join(':');
        const written = upper ? text.toUpperCase() : text;
        const mapped = values.slice(0, 5).every((value) => value === 0) && values[5] === 0xffff;
        const expected = mapped ? `${values[6]! >> 8}.${values[6]! & 0xff}.${values[7]! >> 8}.${values[7]! & 0xff}` : urlCanonical(text);
        expect(normalizeIp(written)).toBe(expected);
      }),
      { numRuns: 20_000 },
    );
  });
});

describe('clientIp keys', () => {
  const byIp = clientIp();

  it('the four spellings of one IPv4 address share a key; an IPv4 embedded in other IPv6 does not', () => {
    const forms = ['::ffff:1.2.3.4', '::ffff:102:304', '0:0:0:0:0:ffff:0102:0304', '1.2.3.4'];
    for (const form of forms) {
      expect(byIp.key(form, noHeaders)).toBe('ip:1.2.3.4');
      expect(byIp.address(form, noHeaders)).toBe('1.2.3.4');
    }
    expect(byIp.key('2001:db8::1.2.3.4', noHeaders)).toBe('ip:2001:db8::/56');
    expect(byIp.key('::1.2.3.4', noHeaders)).toBe('ip:::/56');
  });

  it('keys IPv6 by its /56: 10,000 random addresses in one /56 share a key, the neighbouring /56s do not', () => {
    const group = () => randomBytes(2).readUInt16BE(0).toString(16);
    const inside = (high: number) =>
      `2001:db8:12:${(high * 256 + randomBytes(1)[0]!).toString(16)}:${group()}:${group()}:${group()}:${group()}`;
    const keys = new Set<string>();
    for (let i = 0; i < 10_000; i++) keys.add(byIp.key(inside(0x34), noHeaders));
    expect([...keys]).toEqual(['ip:2001:db8:12:3400::/56']);
    for (let i = 0; i < 100; i++) {
      expect(byIp.key(inside(0x35), noHeaders)).toBe('ip:2001:db8:12:3500::/56');
      expect(byIp.key(inside(0x33), noHeaders)).toBe('ip:2001:db8:12:3300::/56');
    }
  });

  it('each prefix length from 32 to 64 splits exactly at its boundary', () => {
    const base = 0x2001_0db8_abcd_ef01_2345_6789_abcd_ef01n;
    for (let prefix = 32; prefix <= 64; prefix++) {
      const ip = clientIp({ ipv6Subnet: prefix });
      const size = 1n << BigInt(128 - prefix);
      const network = base & ~(size - 1n);
      const expected = `ip:${urlCanonical(fullForm(network))}/${prefix}`;
      expect(ip.key(fullForm(network), noHeaders)).toBe(expected);
      expect(ip.key(fullForm(network + size - 1n), noHeaders)).toBe(expected);
      expect(ip.key(fullForm(network + size), noHeaders)).toBe(`ip:${urlCanonical(fullForm(network + size))}/${prefix}`);
      expect(ip.key(fullForm(network - 1n), noHeaders)).not.toBe(expected);
    }
  });

  it('keys any IPv6 address by its network, printed as RFC 5952 does', () => {
    const ips = new Map<number, ReturnType<typeof clientIp>>();
    const group = fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
    fc.assert(
      fc.property(fc.array(group, { minLength: 8, maxLength: 8 }), fc.integer({ min: 32, max: 64 }), (groups, prefix) => {
        const value = groups.reduce((sum, g) => (sum << 16n) | BigInt(g), 0n);
        fc.pre(value >> 32n !== 0xffffn); // ::ffff:0:0/96 is IPv4
        const network = value & ~((1n << BigInt(128 - prefix)) - 1n);
        if (!ips.has(prefix)) ips.set(prefix, clientIp({ ipv6Subnet: prefix }));
        expect(ips.get(prefix)!.key(fullForm(value), noHeaders)).toBe(`ip:${urlCanonical(fullForm(network))}/${prefix}`);
      }),
      { numRuns: 20_000 },
    );
  });

  it('has a key for requests without a usable address', () => {
    expect(byIp.key(undefined, noHeaders)).toBe('ip:unknown');
    expect(byIp.key('garbage', noHeaders)).toBe('ip:unknown');
    expect(byIp.address(undefined, noHeaders)).toBeUndefined();
  });

  it('drops the zone of a link-local socket address', () => {
    expect(byIp.address('fe80::1%eth0', noHeaders)).toBe('fe80::1');
  });
});

/** address() names `expected`, and key() agrees with it (IPv6 keyed by its /56). */
function expectClient(ip: ClientIp, socket: string | undefined, getter: HeaderGetter, expected: string | undefined): void {
  expect(ip.address(socket, getter)).toBe(expected);
  expect(ip.key(socket, getter)).toBe(expected === undefined ? 'ip:unknown' : clientIp().key(expected, noHeaders));
}

describe('clientIp behind proxies', () => {
  it('without trustProxy reads no header at all: a spoofed X-Forwarded-For changes nothing', () => {
    const asked: string[] = [];
    const spoofed: HeaderGetter = (name) => {
      asked.push(name);
      return '1.1.1.1';
    };
    expect(clientIp().key('203.0.113.7', spoofed)).toBe('ip:203.0.113.7');
    expect(clientIp().key('2001:db8::7', spoofed)).toBe('ip:2001:db8::/56');
    expect(clientIp().key('::ffff:203.0.113.7', spoofed)).toBe('ip:203.0.113.7');
    expect(asked).toEqual([]);
  });

  it('ignores every forwarded header when the socket peer is not a trusted proxy', () => {
    for (const proxyHeader of ['x-forwarded-for', 'forwarded', 'x-real-ip'] as const) {
      const ip = clientIp({ trustProxy: ['10.0.0.0/8'], proxyHeader });
      const forged = headers({ 'x-forwarded-for': '10.0.0.5', forwarded: 'for=10.0.0.5', 'x-real-ip': '10.0.0.5' });
      expect(ip.key('203.0.113.7', forged)).toBe('ip:203.0.113.7');
    }
  });

  it('reads only the configured header, never a second one the proxy does not clean', () => {
    const asked: string[] = [];
    const getter: HeaderGetter = (name) => {
      asked.push(name);
      return { 'x-forwarded-for': '198.51.100.4', forwarded: 'for=6.6.6.6', 'x-real-ip': '6.6.6.6' }[name];
    };
    expect(clientIp({ trustProxy: 'loopback' }).key('127.0.0.1', getter)).toBe('ip:198.51.100.4');
    expect(asked).toEqual(['x-forwarded-for']);
  });

  const cidrCases: [string, string | readonly string[], string | undefined, string | undefined, string | undefined][] = [
    // name, trustProxy, socket, X-Forwarded-For, expected client address
    ['one trusted proxy', ['10.0.0.0/8'], '10.0.0.1', '198.51.100.4', '198.51.100.4'],
    ['two trusted proxies', ['10.0.0.0/8'], '10.0.0.1', '198.51.100.4, 10.0.0.2', '198.51.100.4'],
    ['client prepends a fake hop: right-most untrusted wins', ['10.0.0.0/8'], '10.0.0.1', '6.6.6.6, 198.51.100.4, 10.0.0.2', '198.51.100.4'],
    ['client forges a trusted hop: it is left of the real client', ['10.0.0.0/8'], '10.0.0.1', '10.9.9.9, 198.51.100.4', '198.51.100.4'],
    ['every hop trusted: the left-most', ['10.0.0.0/8'], '10.0.0.1', '10.1.1.1, 10.0.0.2', '10.1.1.1'],
    ['no header: the proxy itself', ['10.0.0.0/8'], '10.0.0.1', undefined, '10.0.0.1'],
    ['empty header: the proxy itself', ['10.0.0.0/8'], '10.0.0.1', '', '10.0.0.1'],
    ['garbage client entry: the proxy that handed it over', ['10.0.0.0/8'], '10.0.0.1', 'garbage, 10.0.0.2', '10.0.0.2'],
    ['unknown: the proxy', ['10.0.0.0/8'], '10.0.0.1', 'unknown', '10.0.0.1'],
    ['garbage between: stop there', ['10.0.0.0/8'], '10.0.0.1', '198.51.100.4, bogus, 10.0.0.2', '10.0.0.2'],
    ['empty entry between', ['10.0.0.0/8'], '10.0.0.1', '198.51.100.4,,10.0.0.2', '10.0.0.2'],
    ['white space, ports and brackets', ['10.0.0.0/8'], '10.0.0.1', ' 198.51.100.4:5555 ,\t10.0.0.2 ', '198.51.100.4'],
    ['IPv6 client', ['10.0.0.0/8'], '10.0.0.1', '[2001:db8:cafe::17]:4711', '2001:db8:cafe::17'],
    ['IPv6 proxies', ['fd00::/8'], 'fd00::1', '2001:db8::9, fd00::2', '2001:db8::9'],
    ['mapped socket address, loopback', 'loopback', '::ffff:127.0.0.1', '198.51.100.4', '198.51.100.4'],
    ['IPv6 loopback', 'loopback', '::1', '198.51.100.4', '198.51.100.4'],
    ['names and CIDRs in one string', 'loopback, 10.0.0.0/8', '127.0.0.1', '198.51.100.4, 10.0.0.2', '198.51.100.4'],
    ['private: 172.31.255.255 is inside', 'private', '172.31.255.255', '198.51.100.4', '198.51.100.4'],
    ['private: 172.32.0.0 is outside', 'private', '172.32.0.0', '198.51.100.4', '172.32.0.0'],
    ['private IPv6 (fc00::/7)', 'private', 'fdff::1', '198.51.100.4', '198.51.100.4'],
    ['linklocal with a zone', 'linklocal', 'fe80::1%eth0', '198.51.100.4', '198.51.100.4'],
    ['one address', '192.168.1.7', '192.168.1.7', '198.51.100.4', '198.51.100.4'],
    ['one address, a neighbour is not trusted', '192.168.1.7', '192.168.1.8', '198.51.100.4', '192.168.1.8'],
    ['mapped CIDR means the IPv4 range', '::ffff:10.0.0.0/104', '10.0.0.1', '198.51.100.4', '198.51.100.4'],
    ['an IPv6 range over all mapped addresses covers IPv4', '::/0', '10.0.0.1', '198.51.100.4', '198.51.100.4'],
    ['trusted socket unknown: headers ignored', ['10.0.0.0/8'], undefined, '198.51.100.4', undefined],
  ];
  it.each(cidrCases)('CIDRs: %s', (_name, trustProxy, socket, forwardedFor, expected) => {
    const ip = clientIp({ trustProxy });
    expectClient(ip, socket, headers(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }), expected);
  });

  const hopCases: [number, string | undefined, string | undefined, string | undefined][] = [
    // hops, socket, X-Forwarded-For, expected
    [1, '10.0.0.1', '198.51.100.1, 198.51.100.2, 198.51.100.3', '198.51.100.3'],
    [2, '10.0.0.1', '198.51.100.1, 198.51.100.2, 198.51.100.3', '198.51.100.2'],
    [3, '10.0.0.1', '198.51.100.1, 198.51.100.2, 198.51.100.3', '198.51.100.1'],
    [5, '10.0.0.1', '198.51.100.1, 198.51.100.2, 198.51.100.3', '198.51.100.1'],
    [1, '10.0.0.1', undefined, '10.0.0.1'],
    [2, '10.0.0.1', 'garbage, 198.51.100.3', '198.51.100.3'],
    [2, '10.0.0.1', '198.51.100.1, garbage', '198.51.100.1'],
    [1, '10.0.0.1', 'unknown', '10.0.0.1'],
    [1, undefined, '198.51.100.3', '198.51.100.3'],
    [2, undefined, 'garbage, 198.51.100.3', '198.51.100.3'],
    [3, undefined, '198.51.100.1, garbage, 198.51.100.3', '198.51.100.1'],
    [1, undefined, 'unknown', undefined],
  ];
  it.each(hopCases)('hop count %i, socket %s, X-Forwarded-For %j → %s', (hops, socket, forwardedFor, expected) => {
    const ip = clientIp({ trustProxy: hops });
    expectClient(ip, socket, headers(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }), expected);
  });

  const forwardedCases: [string, string, string][] = [
    // name, Forwarded, expected (trusted socket 10.0.0.1, trustProxy 10.0.0.0/8)
    ['RFC 7239 example', 'for=192.0.2.60;proto=http;by=203.0.113.43', '192.0.2.60'],
    ['quoted IPv6 with port', 'for="[2001:db8:cafe::17]:4711"', '2001:db8:cafe::17'],
    ['quoted IPv4 with port, name in capitals', 'For="192.0.2.43:47011"', '192.0.2.43'],
    ['for= after other parameters', 'proto=https; for=192.0.2.43', '192.0.2.43'],
    ['two elements, right-most untrusted', 'for=192.0.2.43, for=198.51.100.17;by=10.0.0.1', '198.51.100.17'],
    ['trusted element skipped', 'for=192.0.2.43, for=10.0.0.3;proto=https', '192.0.2.43'],
    ['for=unknown', 'for=unknown', '10.0.0.1'],
    ['obfuscated identifier', 'for=_hidden', '10.0.0.1'],
    ['quoted obfuscated identifier', 'for="_gazonk"', '10.0.0.1'],
    ['no for=', 'proto=https;by=10.0.0.1', '10.0.0.1'],
    ['two for= in one element', 'for=192.0.2.1;for=192.0.2.2', '10.0.0.1'],
    ['spaces around =', 'for = 192.0.2.1', '10.0.0.1'],
    ['unterminated quote', 'for="192.0.2.1', '10.0.0.1'],
    ['escape in the quoted value', 'for="192.0.2.1\\"', '10.0.0.1'],
    ['client hides a comma in quotes', 'for="6.6.6.6, for=7.7.7.7", for=198.51.100.17', '198.51.100.17'],
    ['client leaves a quote open', 'for="6.6.6.6, for=198.51.100.17', '198.51.100.17'],
    ['escaped quotes on the client side', 'for="a\\",b", for=198.51.100.17', '198.51.100.17'],
    ['escaped quote and comma in a quoted proxy parameter', 'for=198.51.100.17, for=203.0.113.9;ext="x\\",y"', '203.0.113.9'],
    ['unquoted bracketed IPv6 (lenient)', 'for=[2001:db8::1]', '2001:db8::1'],
  ];
  it.each(forwardedCases)('Forwarded: %s', (_name, forwarded, expected) => {
    const ip = clientIp({ trustProxy: '10.0.0.0/8', proxyHeader: 'forwarded' });
    expectClient(ip, '10.0.0.1', headers({ forwarded }), expected);
  });

  it('X-Real-IP: one address from a trusted peer; two joined headers are not an address', () => {
    const ip = clientIp({ trustProxy: 'loopback', proxyHeader: 'x-real-ip' });
    expect(ip.address('127.0.0.1', headers({ 'x-real-ip': '198.51.100.7' }))).toBe('198.51.100.7');
    expect(ip.address('127.0.0.1', headers({ 'x-real-ip': '127.0.0.5' }))).toBe('127.0.0.5');
    expect(ip.address('127.0.0.1', headers({ 'x-real-ip': '198.51.100.7, 6.6.6.6' }))).toBe('127.0.0.1');
    expect(ip.address('203.0.113.1', headers({ 'x-real-ip': '198.51.100.7' }))).toBe('203.0.113.1');
    expect(clientIp({ trustProxy: 2, proxyHeader: 'x-real-ip' }).address('10.0.0.1', headers({ 'x-real-ip': '198.51.100.7' }))).toBe('198.51.100.7');
  });

  it('reads the proxies’ end of an oversize header: padding does not move a client to another key', () => {
    const ip = clientIp({ trustProxy: '10.0.0.0/8' });
    const padded = `${'9'.repeat(1_000_000)}, 198.51.100.4`;
    expect(ip.key('10.0.0.1', headers({ 'x-forwarded-for': padded }))).toBe('ip:198.51.100.4');
    const noComma = '1'.repeat(1_000_000);
    expect(ip.key('10.0.0.1', headers({ 'x-forwarded-for': noComma }))).toBe('ip:10.0.0.1');
    const forwarded = clientIp({ trustProxy: '10.0.0.0/8', proxyHeader: 'forwarded' });
    expect(forwarded.key('10.0.0.1', headers({ forwarded: `for="${'"'.repeat(100_000)}, for=198.51.100.4` }))).toBe('ip:198.51.100.4');
  });

  it('reads at most 64 entries and the last 8 KiB: past that, the left-most entry read', () => {
    const ip = clientIp({ trustProxy: '10.0.0.0/8' });
    const hops = Array.from({ length: 100 }, (_, i) => `10.0.${i >> 8}.${i & 0xff}`);
    // All trusted, the client beyond the 64 entries read: the 64th from the right stands in.
    expect(ip.address('10.0.0.1', headers({ 'x-forwarded-for': ['198.51.100.4', ...hops].join(', ') }))).toBe(hops[100 - 64]);
    // The 8 KiB edge cuts "203.0.113.99" to "3.0.113.99": a valid-looking address that is not the
    // client. The cut entry counts as garbage: the nearest whole entry on its right stands in.
    const padded = (',' + ' '.repeat(800) + '10.0.0.2').repeat(10);
    const suffix = ',' + ' '.repeat(8192 - 10 - padded.length - 9) + '10.0.0.3' + padded;
    const cut = `garbage, 203.0.113.99${suffix}`;
    expect(cut.slice(cut.length - 8192).startsWith('3.0.113.99,')).toBe(true);
    expect(ip.address('10.0.0.1', headers({ 'x-forwarded-for': cut }))).toBe('10.0.0.3');
    // More than 8 KiB of long (ported IPv6) trusted entries: the entry cut by the 8 KiB edge is not read.
    const ip6 = clientIp({ trustProxy: 'fd00::/8' });
    const long = Array.from({ length: 60 }, (_, i) => `[fd00:1111:2222:3333:4444:5555:6666:${i.toString(16)}]:65535`);
    const value = ['2001:db8::1', ...long].join(`,${' '.repeat(100)}`);
    expect(value.length).toBeGreaterThan(8192);
    // The first entry whose comma lies inside the last 8 KiB: the one before it may be cut short.
    const lower = value.length - 8192;
    let comma = value.indexOf(',');
    while (comma < lower) comma = value.indexOf(',', comma + 1);
    const expected = normalizeIp(value.slice(comma + 1).split(',')[0]!.trim());
    expect(ip6.address('fd00::1', headers({ 'x-forwarded-for': value }))).toBe(expected);
  });
});

describe('clientIp options', () => {
  const bad: [string, unknown, RegExp][] = [
    ['trustProxy: true', { trustProxy: true }, /trustProxy: true would trust every peer.*trustProxy: 1.*'10\.0\.0\.0\/8'/],
    ['trustProxy: 0', { trustProxy: 0 }, /integer from 1 to 64, got 0; write false to trust no proxy/],
    ['fractional hops', { trustProxy: 1.5 }, /integer from 1 to 64, got 1\.5/],
    ['too many hops', { trustProxy: 65 }, /integer from 1 to 64, got 65/],
    ['not an address', { trustProxy: 'proxy.internal' }, /"proxy\.internal" is not an address, a CIDR or one of loopback, private, linklocal/],
    ['host bits set', { trustProxy: '10.0.0.1/8' }, /"10\.0\.0\.1\/8" has bits set past the prefix; write "10\.0\.0\.0\/8"/],
    ['IPv6 host bits set', { trustProxy: ['fd00::1/8'] }, /write "fd00::\/8"/],
    ['prefix too long', { trustProxy: '10.0.0.0/33' }, /prefix length from 0 to 32/],
    ['prefix not a number', { trustProxy: '::1/abc' }, /prefix length from 0 to 128/],
    ['empty list', { trustProxy: [] }, /lists no address; write false/],
    ['empty string', { trustProxy: ' ' }, /lists no address; write false/],
    ['a number in the list', { trustProxy: [42] }, /entries must be strings/],
    ['an object', { trustProxy: {} }, /trustProxy must be false, a hop count, or CIDRs/],
    ['subnet too short', { ipv6Subnet: 31 }, /ipv6Subnet must be a whole number from 32 to 64.*got 31/],
    ['subnet too long', { ipv6Subnet: 128 }, /got 128/],
    ['subnet as a string', { ipv6Subnet: '56' }, /got "56"/],
    ['unknown header', { proxyHeader: 'x-client-ip' }, /proxyHeader must be "x-forwarded-for", "forwarded", "x-real-ip", got "x-client-ip"/],
    ['misspelt option', { trustproxy: 1 }, /unknown option "trustproxy"; the options are trustProxy, proxyHeader, ipv6Subnet/],
    ['not an object', null, /clientIp options must be an object/],
  ];
  it.each(bad)('refuses %s', (_name, options, message) => {
    expect(() => clientIp(options as never)).toThrow(InvalidOptionError);
    expect(() => clientIp(options as never)).toThrow(message);
  });

  it('accepts the edges and a header name in any case', () => {
    expect(clientIp({ ipv6Subnet: 32 }).key('2001:db8:ffff::1', noHeaders)).toBe('ip:2001:db8::/32');
    expect(clientIp({ ipv6Subnet: 64 }).key('2001:db8:1:2:3::1', noHeaders)).toBe('ip:2001:db8:1:2::/64');
    expect(clientIp({ trustProxy: 64 }).key('10.0.0.1', noHeaders)).toBe('ip:10.0.0.1');
    expect(clientIp({ trustProxy: 1, proxyHeader: 'X-Forwarded-For' as 'x-forwarded-for' }).key('10.0.0.1', headers({ 'x-forwarded-for': '1.2.3.4' }))).toBe('ip:1.2.3.4');
  });
});

describe('apiKeyIdentity', () => {
  const expected = (key: string) => `key:${createHash('sha256').update(key).digest().subarray(0, 16).toString('base64url')}`;

  it('hashes the key: the raw key never becomes a store key', () => {
    const identity = apiKeyIdentity()(headers({ 'x-api-key': 'sk_live_abc123' }));
    expect(identity).toBe(expected('sk_live_abc123'));
    expect(identity).toMatch(/^key:[A-Za-z0-9_-]{22}$/);
    expect(identity).not.toContain('abc123');
    expect(apiKeyIdentity()(headers({ 'x-api-key': 'sk_live_abc124' }))).not.toBe(identity);
  });

  it('is base64url of the first 16 bytes of SHA-256, for any key', () => {
    const identify = apiKeyIdentity();
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }), (key) => {
        fc.pre(key.trim() === key && key.length > 0);
        expect(identify(headers({ 'x-api-key': key }))).toBe(expected(key));
      }),
      { numRuns: 5_000 },
    );
  });

  it('has no identity for an absent, empty or oversize key', () => {
    const identify = apiKeyIdentity();
    expect(identify(noHeaders)).toBeUndefined();
    expect(identify(headers({ 'x-api-key': '' }))).toBeUndefined();
    expect(identify(headers({ 'x-api-key': 'k'.repeat(4096) }))).toBe(expected('k'.repeat(4096)));
    expect(identify(headers({ 'x-api-key': 'k'.repeat(4097) }))).toBeUndefined();
  });

  it('strips the scheme of the authorization header (Bearer by default, any case)', () => {
    const identify = apiKeyIdentity({ header: 'Authorization' });
    expect(identify(headers({ authorization: 'Bearer abc' }))).toBe(expected('abc'));
    expect(identify(headers({ authorization: 'bearer   abc' }))).toBe(expected('abc'));
    expect(identify(headers({ authorization: 'Basic abc' }))).toBeUndefined();
    expect(identify(headers({ authorization: 'Bearer' }))).toBeUndefined();
    expect(identify(headers({ authorization: 'Bearerabc' }))).toBeUndefined();
    const custom = apiKeyIdentity({ header: 'authorization', scheme: 'ApiKey ' });
    expect(custom(headers({ authorization: 'ApiKey abc' }))).toBe(expected('abc'));
    expect(custom(headers({ authorization: 'Bearer abc' }))).toBeUndefined();
  });

  it.each([
    [{ header: 'x api key' }, /header must be a header name/],
    [{ scheme: 'Bear er' }, /scheme must be an authentication scheme/],
    [{ headers: 'x-api-key' }, /unknown option "headers"; the options are header, scheme/],
  ])('refuses %j', (options, message) => {
    expect(() => apiKeyIdentity(options as never)).toThrow(message);
  });
});

describe('jwtIdentity', () => {
  const NOW = 1_700_000_000_000;
  const NOW_S = NOW / 1000;
  const secret = 'a-secret-of-at-least-thirty-two-bytes!';
  const secretBytes = new TextEncoder().encode(secret);
  const clock = (at = NOW) => () => at;
  const bearer = (token: string) => headers({ authorization: `Bearer ${token}` });

  interface Claims {
    [claim: string]: unknown;
  }
  async function sign(
    claims: Claims,
    key: CryptoKey | Uint8Array,
    alg = 'HS256',
    options: { exp?: number; nbf?: number; iss?: string; aud?: string; kid?: string } = {},
  ): Promise<string> {
    const jwt = new SignJWT(claims).setProtectedHeader(options.kid === undefined ? { alg } : { alg, kid: options.kid }).setIssuedAt(NOW_S);
    jwt.setExpirationTime(options.exp ?? NOW_S + 3600);
    if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
    if (options.iss !== undefined) jwt.setIssuer(options.iss);
    if (options.aud !== undefined) jwt.setAudience(options.aud);
    return jwt.sign(key);
  }
  function unsigned(claims: Claims, signature = ''): string {
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    return `${part({ alg: 'none', typ: 'JWT' })}.${part({ exp: NOW_S + 3600, ...claims })}.${signature}`;
  }

  let rsa: { publicKey: CryptoKey; privateKey: CryptoKey };
  let ec: { publicKey: CryptoKey; privateKey: CryptoKey };
  let otherRsa: { publicKey: CryptoKey; privateKey: CryptoKey };
  let rsaPem: string;
  let ecPem: string;
  let server: Server;
  let jwksUrl: string;
  let jwksRequests = 0;

  beforeAll(async () => {
    rsa = await generateKeyPair('RS256', { extractable: true });
    ec = await generateKeyPair('ES256', { extractable: true });
    otherRsa = await generateKeyPair('RS256', { extractable: true });
    rsaPem = await exportSPKI(rsa.publicKey);
    ecPem = await exportSPKI(ec.publicKey);
    const keys: JWK[] = [
      { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    ];
    server = createServer((request, response) => {
      jwksRequests++;
      if (request.url !== '/.well-known/jwks.json') {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  describe('with a secret (HS256)', () => {
    const identify = (options: Partial<JwtOptions> = {}) => jwtIdentity({ secret, now: clock(), ...options });

    it('names the user by sub, or by another claim', async () => {
      expect(await identify()(bearer(await sign({ sub: 'alice' }, secretBytes)))).toBe('user:alice');
      expect(await identify({ claim: 'uid' })(bearer(await sign({ sub: 'alice', uid: 42 }, secretBytes)))).toBe('user:42');
      expect(await identify({ secret: secretBytes })(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS512')))).toBe('user:alice');
    });

    it('has no identity without a usable claim', async () => {
      expect(await identify({ claim: 'uid' })(bearer(await sign({ sub: 'alice' }, secretBytes)))).toBeUndefined();
      expect(await identify({ claim: 'uid' })(bearer(await sign({ uid: { id: 1 } }, secretBytes)))).toBeUndefined();
      expect(await identify()(bearer(await sign({ sub: '' }, secretBytes)))).toBeUndefined();
      expect(await identify()(bearer(await sign({ sub: 'x'.repeat(2000) }, secretBytes)))).toBeUndefined();
    });

    it('refuses expired, not-yet-valid, wrongly issued, wrongly addressed and forged tokens', async () => {
      const id = identify({ issuer: ['https://a.example', 'https://b.example'], audience: 'api' });
      const good = { iss: 'https://b.example', aud: 'api' };
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', good)))).toBe('user:alice');
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { ...good, exp: NOW_S - 1 })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { ...good, exp: NOW_S })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { ...good, nbf: NOW_S + 60 })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { ...good, iss: 'https://evil.example' })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { ...good, aud: 'other' })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS256', { aud: 'api' })))).toBeUndefined();
      const forged = await sign({ sub: 'alice' }, new TextEncoder().encode('another-secret-of-thirty-two-bytes!!'), 'HS256', good);
      expect(await id(bearer(forged))).toBeUndefined();
      const [head, , signature] = (await sign({ sub: 'alice' }, secretBytes, 'HS256', good)).split('.');
      const tampered = `${head}.${Buffer.from(JSON.stringify({ sub: 'mallory', ...good, exp: NOW_S + 3600 })).toString('base64url')}.${signature}`;
      expect(await id(bearer(tampered))).toBeUndefined();
    });

    it("refuses alg 'none' and algorithms not allowed", async () => {
      expect(await identify()(bearer(unsigned({ sub: 'alice' })))).toBeUndefined();
      expect(await identify()(bearer(unsigned({ sub: 'alice' }, 'c2ln')))).toBeUndefined();
      expect(await identify({ algorithms: ['HS256'] })(bearer(await sign({ sub: 'alice' }, secretBytes, 'HS512')))).toBeUndefined();
    });

    it('has no identity for absent or malformed tokens, and never rejects', async () => {
      const id = identify();
      const token = await sign({ sub: 'alice' }, secretBytes);
      const cases: HeaderGetter[] = [
        noHeaders,
        headers({ authorization: '' }),
        headers({ authorization: 'Bearer' }),
        headers({ authorization: `Basic ${token}` }),
        headers({ authorization: token }),
        bearer('abc'),
        bearer('a.b'),
        bearer('a.b.c.d'),
        bearer('..'),
        bearer(`${token} x`),
        bearer(`${token.slice(0, -2)}!!`),
        bearer('eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln'),
        bearer(`${token}.${'a'.repeat(9000)}`),
        bearer('a'.repeat(9000)),
      ];
      for (const getter of cases) await expect(id(getter)).resolves.toBeUndefined();
    });

    it('reads another header, with or without a scheme', async () => {
      const token = await sign({ sub: 'alice' }, secretBytes);
      expect(await identify({ header: 'x-token' })(headers({ 'x-token': token }))).toBe('user:alice');
      expect(await identify({ header: 'x-token', scheme: 'JWT' })(headers({ 'x-token': `jwt ${token}` }))).toBe('user:alice');
    });
  });

  describe('with a public key', () => {
    it('verifies RS256 and ES256 with a PEM key', async () => {
      const rs = jwtIdentity({ publicKey: rsaPem, algorithms: ['RS256'], now: clock() });
      expect(await rs(bearer(await sign({ sub: 'rsa-user' }, rsa.privateKey, 'RS256')))).toBe('user:rsa-user');
      expect(await rs(bearer(await sign({ sub: 'rsa-user' }, otherRsa.privateKey, 'RS256')))).toBeUndefined();
      const es = jwtIdentity({ publicKey: ecPem, algorithms: ['ES256'], now: clock() });
      expect(await es(bearer(await sign({ sub: 'ec-user' }, ec.privateKey, 'ES256')))).toBe('user:ec-user');
      expect(await es(bearer(await sign({ sub: 'rsa-user' }, rsa.privateKey, 'RS256')))).toBeUndefined();
    });

    it('verifies with a JWK object, a KeyObject and a CryptoKey', async () => {
      const token = await sign({ sub: 'rsa-user' }, rsa.privateKey, 'RS256');
      for (const publicKey of [await exportJWK(rsa.publicKey), createPublicKey(rsaPem), rsa.publicKey]) {
        expect(await jwtIdentity({ publicKey, algorithms: ['RS256'], now: clock() })(bearer(token))).toBe('user:rsa-user');
      }
    });

    it('cannot be tricked into using the public key as an HMAC secret', async () => {
      const confused = await sign({ sub: 'mallory' }, new TextEncoder().encode(rsaPem), 'HS256');
      expect(await jwtIdentity({ publicKey: rsaPem, algorithms: ['RS256'], now: clock() })(bearer(confused))).toBeUndefined();
    });
  });

  describe('with a JWKS URL', () => {
    it('verifies RS256 and ES256 tokens with keys fetched over HTTP', async () => {
      const id = jwtIdentity({ jwksUrl, algorithms: ['RS256', 'ES256'], now: clock() });
      expect(await id(bearer(await sign({ sub: 'rsa-user' }, rsa.privateKey, 'RS256', { kid: 'rsa-1' })))).toBe('user:rsa-user');
      expect(await id(bearer(await sign({ sub: 'ec-user' }, ec.privateKey, 'ES256', { kid: 'ec-1' })))).toBe('user:ec-user');
      expect(await id(bearer(await sign({ sub: 'ec-user' }, ec.privateKey, 'ES256')))).toBe('user:ec-user');
      expect(await id(bearer(await sign({ sub: 'x' }, otherRsa.privateKey, 'RS256', { kid: 'rsa-1' })))).toBeUndefined();
      expect(await id(bearer(await sign({ sub: 'x' }, otherRsa.privateKey, 'RS256', { kid: 'nope' })))).toBeUndefined();
      expect(jwksRequests).toBeGreaterThan(0);
    });

    it('reports an unreachable JWKS through onError, and a bad token not at all', async () => {
      const errors: unknown[] = [];
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const id = jwtIdentity({ jwksUrl: `http://127.0.0.1:${port}/jwks.json`, algorithms: ['RS256'], now: clock(), onError: (error) => errors.push(error) });
      expect(await id(bearer(await sign({ sub: 'rsa-user' }, rsa.privateKey, 'RS256', { kid: 'rsa-1' })))).toBeUndefined();
      expect(errors).toHaveLength(1);
      const reachable = jwtIdentity({ jwksUrl, algorithms: ['RS256'], now: clock(), onError: (error) => errors.push(error) });
      expect(await reachable(bearer(await sign({ sub: 'x' }, otherRsa.privateKey, 'RS256', { kid: 'rsa-1' })))).toBeUndefined();
      expect(await reachable(bearer(unsigned({ sub: 'x' })))).toBeUndefined();
      expect(errors).toHaveLength(1);
    });
  });

  describe('cache', () => {
    it('answers a verified token from the cache, without verifying it again', async () => {
      // The clock is moved back before the token's nbf: jose would refuse it, the cache does not ask.
      let now = NOW;
      const token = await sign({ sub: 'alice' }, secretBytes, 'HS256', { nbf: NOW_S });
      const cached = jwtIdentity({ secret, now: () => now });
      const uncached = jwtIdentity({ secret, now: () => now, cacheSize: 0 });
      expect(await cached(bearer(token))).toBe('user:alice');
      expect(await uncached(bearer(token))).toBe('user:alice');
      now = NOW - 60_000;
      expect(await cached(bearer(token))).toBe('user:alice');
      expect(await uncached(bearer(token))).toBeUndefined();
    });

    it('keeps no token past its exp', async () => {
      let now = NOW;
      const id = jwtIdentity({ secret, now: () => now });
      const token = await sign({ sub: 'alice' }, secretBytes, 'HS256', { exp: NOW_S + 10 });
      expect(await id(bearer(token))).toBe('user:alice');
      now = NOW + 9_999;
      expect(await id(bearer(token))).toBe('user:alice');
      now = NOW + 10_000;
      expect(await id(bearer(token))).toBeUndefined();
    });

    it('is bounded: the least recently used token goes first', async () => {
      let now = NOW;
      const id = jwtIdentity({ secret, now: () => now, cacheSize: 2 });
      const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((sub) => sign({ sub }, secretBytes, 'HS256', { nbf: NOW_S })));
      expect(await id(bearer(a!))).toBe('user:a');
      expect(await id(bearer(b!))).toBe('user:b');
      expect(await id(bearer(a!))).toBe('user:a'); // a is now more recently used than b
      expect(await id(bearer(c!))).toBe('user:c'); // evicts b
      now = NOW - 1_000; // before nbf: only cached tokens are still answered
      expect(await id(bearer(b!))).toBeUndefined();
      expect(await id(bearer(a!))).toBe('user:a');
      expect(await id(bearer(c!))).toBe('user:c');
    });
  });

  describe('options', () => {
    const bad: [string, unknown, RegExp][] = [
      ['no key source', {}, /give exactly one of secret \(HMAC\), publicKey \(PEM, JWK or KeyObject\) or jwksUrl, got none/],
      ['two key sources', { secret, jwksUrl: 'https://a.example/jwks.json', algorithms: ['RS256'] }, /got secret and jwksUrl/],
      ['public key without algorithms', { publicKey: 'PEM' }, /list the algorithms your tokens are signed with/],
      ['alg none', { secret, algorithms: ['HS256', 'none'] }, /must not contain "none"/],
      ['HMAC with a public key', { jwksUrl: 'https://a.example/jwks.json', algorithms: ['HS256'] }, /HMAC tokens need secret instead/],
      ['RS256 with a secret', { secret, algorithms: ['RS256'] }, /with a secret, algorithms must be among HS256, HS384, HS512, got RS256/],
      ['empty algorithms', { secret, algorithms: [] }, /algorithms must be a non-empty array/],
      ['empty secret', { secret: '' }, /secret must be a non-empty string or Uint8Array/],
      ['garbage PEM', { publicKey: '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----', algorithms: ['RS256'] }, /publicKey cannot be read/],
      ['not PEM', { publicKey: 'abc', algorithms: ['RS256'] }, /publicKey as a string must be PEM/],
      ['private JWK', { publicKey: { kty: 'EC', d: 'x' }, algorithms: ['ES256'] }, /private JWK/],
      ['symmetric JWK', { publicKey: { kty: 'oct', k: 'x' }, algorithms: ['ES256'] }, /give it as secret instead/],
      ['bad jwksUrl', { jwksUrl: 'not a url', algorithms: ['RS256'] }, /jwksUrl must be an http\(s\) URL/],
      ['ftp jwksUrl', { jwksUrl: 'ftp://a.example/jwks', algorithms: ['RS256'] }, /jwksUrl must be an http\(s\) URL/],
      ['empty claim', { secret, claim: '' }, /claim must be the name of a claim/],
      ['empty issuer list', { secret, issuer: [] }, /issuer must be a non-empty string or array/],
      ['negative cacheSize', { secret, cacheSize: -1 }, /cacheSize must be a whole number ≥ 0/],
      ['misspelt option', { secret, audiences: 'api' }, /unknown option "audiences"/],
    ];
    it.each(bad)('refuses %s', (_name, options, message) => {
      expect(() => jwtIdentity(options as JwtOptions)).toThrow(InvalidOptionError);
      expect(() => jwtIdentity(options as JwtOptions)).toThrow(message);
    });

    it('refuses a key that cannot verify the algorithms listed, and a private key', async () => {
      expect(() => jwtIdentity({ publicKey: ecPem, algorithms: ['RS256'] })).toThrow(/the publicKey \(ec\) cannot verify RS256; it can verify ES256/);
      expect(() => jwtIdentity({ publicKey: rsaPem, algorithms: ['RS256', 'ES384'] })).toThrow(/cannot verify ES384/);
      const privatePem = await exportPKCS8(rsa.privateKey);
      expect(() => jwtIdentity({ publicKey: privatePem, algorithms: ['RS256'] })).toThrow(/publicKey is a private key/);
    });
  });
});
