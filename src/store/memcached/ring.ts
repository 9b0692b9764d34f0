/**
 * Consistent hashing across memcached servers: a ketama ring (the scheme libmemcached and most
 * clients share). Each server takes 160 points, four from each MD5 of `host:port-i`; a key goes to
 * the first point at or after the first 4 bytes of its own MD5 (wrapping around). Adding or
 * removing a server moves only the keys whose points it takes or gave up: about 1/n of them.
 */
import { createHash } from 'node:crypto';

const HASHES_PER_SERVER = 40;

export class HashRing<T> {
  /** Point positions, ascending, and the server at each. */
  private readonly points: Uint32Array;
  private readonly owners: T[];

  /** `servers` by their names (`host:port`): the names decide the points, so every node builds the same ring. */
  constructor(servers: readonly { readonly name: string; readonly server: T }[]) {
    const points: { at: number; server: T }[] = [];
    for (const { name, server } of servers) {
      for (let i = 0; i < HASHES_PER_SERVER; i++) {
        const digest = createHash('md5').update(`${name}-${i}`).digest();
        for (let part = 0; part < 4; part++) points.push({ at: digest.readUInt32LE(part * 4), server });
      }
    }
    points.sort((a, b) => a.at - b.at);
    this.points = Uint32Array.from(points, (point) => point.at);
    this.owners = points.map((point) => point.server);
  }

  /** The server holding `key`. */
  serverOf(key: string): T {
    const owners = this.owners;
    if (owners.length === HASHES_PER_SERVER * 4) return owners[0]!;
    const at = createHash('md5').update(key).digest().readUInt32LE(0);
    // The first point ≥ at, or the first point of the ring.
    let low = 0;
    let high = this.points.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.points[middle]! < at) low = middle + 1;
      else high = middle;
    }
    return owners[low === owners.length ? 0 : low]!;
  }
}
