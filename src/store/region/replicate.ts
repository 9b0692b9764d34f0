/**
 * The replicator of one region: every `intervalMs` it reads the counter hashes its region changed
 * (the change log the decision script keeps), takes its region's own fields of each, and max-merges
 * them into every peer region's Redis (merge.lua). It never copies the fields of other regions:
 * each region's replicator carries that region's share, so with one replicator per region every
 * region ends up with every share, and a replay, a reordering or a retry changes nothing.
 *
 * Pushes to a peer are pipelined (a new batch goes out every interval without waiting for the
 * last one's reply), so a change reaches a peer within about one interval plus the one-way delay.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { InvalidOptionError, StoreUnavailableError, describeValue } from '../../errors.js';
import { checkOptions, checkWholeNumbers, type WholeNumberRange } from '../../options.js';
import { checkKeyPrefix } from '../redis/connect.js';
import { REGION_ACK_SCRIPT, REGION_MERGE_SCRIPT, REGION_PULL_SCRIPT } from './lua.js';
import { checkRegionName, evaluate, openRegionClient, regionKeys, type RegionConnection, type RegionKeys } from './shared.js';

/** A peer region: its name and its Redis. */
export interface PeerRegion extends RegionConnection {
  readonly region: string;
}

/** Options of {@link startReplicator}. */
export interface ReplicatorOptions {
  /** The region this replicator carries the share of (its store's `region`). */
  readonly region: string;
  /** That region's own Redis. */
  readonly from: RegionConnection;
  /** The other regions, each with its Redis (at least one). */
  readonly to: readonly PeerRegion[];
  /** How often changes are sent, in ms. Default 50. */
  readonly intervalMs?: number;
  /** The stores' key prefix (the same in every region). Default `tollgate:`. */
  readonly keyPrefix?: string;
  /** Most hashes sent to a peer in one batch. Default 500. */
  readonly batchSize?: number;
  /** Most batches in flight to a peer at once. Default 8. */
  readonly maxInFlight?: number;
  /** Deadline of one Redis command in ms. Default 2,000. */
  readonly commandTimeoutMs?: number;
  /** Called with each failed round of a peer (a down link, say); the replicator keeps retrying. */
  readonly onError?: (error: Error, peer: string) => void;
  /**
   * Called when the region's own Redis lost its data (restarted without persistence, flushed) or
   * holds less than was sent (a failover to a replica that lagged): the replicator sends its change
   * log again from the cursors that Redis holds (from the start when it lost them).
   */
  readonly onSourceReset?: (reset: SourceReset) => void;
}

/** A loss of data at the region's own Redis, as the replicator saw it. */
export interface SourceReset {
  /** `epoch`: the id of its data is another or gone (restart, FLUSHALL); `sequence`: its change sequence is below what was sent (a lagging replica promoted). */
  readonly reason: 'epoch' | 'sequence';
  /** When it was seen (epoch ms). */
  readonly at: number;
  /** The epoch id before, and the one the replicator goes on with. */
  readonly previousEpoch: string | undefined;
  readonly epoch: string;
}

/** What the replicator did, per peer. */
export interface PeerStats {
  readonly region: string;
  /** Hashes sent and applied at the peer. */
  readonly keysReplicated: number;
  /** Fields the peer raised (the rest it already had: replays change nothing). */
  readonly fieldsRaised: number;
  /** The change sequence the peer has everything up to. */
  readonly acked: number;
  /** Changes waiting to be sent, as of the last read. */
  readonly pending: number;
  /** Changes the region made that the peer has not acknowledged, as of the last read (its sequence − `acked`). */
  readonly behind: number;
  /** Time from reading the last applied batch to its acknowledgement by the peer, in ms. */
  readonly lastLagMs: number | undefined;
  /** The longest such time since the replicator started, in ms. */
  readonly maxLagMs: number | undefined;
  /**
   * The longest time between two reads for this peer, in ms (the interval, unless the event loop
   * was late or the peer had `maxInFlight` batches out). A change reaches the peer at most this
   * plus `maxLagMs` after it was made.
   */
  readonly maxReadGapMs: number | undefined;
  /** When the peer last acknowledged a batch (epoch ms). */
  readonly lastSuccessAt: number | undefined;
  /** The last failure's message, cleared by the next success. */
  readonly lastError: string | undefined;
}

export interface ReplicatorStats {
  readonly region: string;
  readonly rounds: number;
  /** The id of the data of the region's own Redis the replicator sends from (see {@link SourceReset}). */
  readonly epoch: string | undefined;
  /** How many times the region's own Redis was seen to lose data; the last of them. */
  readonly sourceResets: number;
  readonly lastSourceReset: SourceReset | undefined;
  readonly peers: readonly PeerStats[];
}

/** A running replicator. */
export interface Replicator {
  /** Resolves once connected to its own region (peers connect in the background). */
  ready(): Promise<void>;
  stats(): ReplicatorStats;
  /** Stops the rounds and closes the connections it opened. */
  close(): Promise<void>;
}

const OPTION_NAMES: ReadonlySet<string> = new Set(['region', 'from', 'to', 'intervalMs', 'keyPrefix', 'batchSize', 'maxInFlight', 'commandTimeoutMs', 'onError', 'onSourceReset']);
const CONNECTION_NAMES: ReadonlySet<string> = new Set(['url', 'client', 'password', 'username', 'tls', 'cluster', 'sentinels']);

/** The replicator's whole-number options: their ranges and defaults. */
const REPLICATOR_NUMBERS = {
  intervalMs: { min: 1, fallback: 50 },
  batchSize: { min: 1, fallback: 500 },
  maxInFlight: { min: 1, fallback: 8 },
  commandTimeoutMs: { min: 1, fallback: 2_000 },
} as const satisfies Record<string, WholeNumberRange>;

interface Peer {
  readonly region: string;
  readonly client: Redis;
  readonly owned: boolean;
  /** The highest cursor this replicator saw written to the source (the ack script's reply): a lower one read later means older data. */
  persisted: number;
  /** Sequence the peer acknowledged, and sequence already sent (≥ acked; back to acked on failure). */
  acked: number;
  sent: number;
  generation: number;
  inFlight: number;
  keysReplicated: number;
  fieldsRaised: number;
  pending: number;
  /** The region's change sequence as of the last read. */
  sequence: number;
  lastLagMs: number | undefined;
  maxLagMs: number | undefined;
  lastReadAt: number | undefined;
  maxReadGapMs: number | undefined;
  lastSuccessAt: number | undefined;
  lastError: string | undefined;
}

/** Starts replicating `region`'s share to its peers. */
export function startReplicator(options: ReplicatorOptions): Replicator {
  return new RegionReplicator(options);
}

class RegionReplicator implements Replicator {
  private readonly region: string;
  private readonly keys: RegionKeys;
  private readonly source: { client: Redis; owned: boolean };
  private readonly peers: Peer[];
  private readonly intervalMs: number;
  private readonly batchSize: number;
  private readonly maxInFlight: number;
  private readonly onError: ((error: Error, peer: string) => void) | undefined;
  private readonly onSourceReset: ((reset: SourceReset) => void) | undefined;
  private readonly started: Promise<void>;
  /** The id of the source's data the cursors were read in; undefined until first read. */
  private epoch: string | undefined;
  /** Set while the epoch and cursors are read again: no batch goes out meanwhile. */
  private syncing: Promise<void> | undefined;
  private sourceResets = 0;
  private lastSourceReset: SourceReset | undefined;
  private timer: NodeJS.Timeout | undefined;
  private rounds = 0;
  private closed = false;

  constructor(options: ReplicatorOptions) {
    const where = 'startReplicator';
    checkOptions(where, options, OPTION_NAMES, "{ region: 'eu', from: { url }, to: [{ region: 'us', url }] }");
    this.region = checkRegionName(where, options.region);
    this.keys = regionKeys(checkKeyPrefix(where, options.keyPrefix), this.region);
    const numbers = checkWholeNumbers(REPLICATOR_NUMBERS, (name) => options[name], (name) => `${where}: ${name}`);
    this.intervalMs = numbers.intervalMs;
    this.batchSize = numbers.batchSize;
    this.maxInFlight = numbers.maxInFlight;
    const timeouts = { commandTimeout: numbers.commandTimeoutMs, connectTimeout: 5_000 };
    if (options.onError !== undefined && typeof options.onError !== 'function') {
      throw new InvalidOptionError(`${where}: onError must be a function (error, peer) => void, got ${describeValue(options.onError)}`);
    }
    this.onError = options.onError;
    if (options.onSourceReset !== undefined && typeof options.onSourceReset !== 'function') {
      throw new InvalidOptionError(`${where}: onSourceReset must be a function (reset) => void, got ${describeValue(options.onSourceReset)}`);
    }
    this.onSourceReset = options.onSourceReset;
    const peerOptions = checkPeers(where, this.region, options.to);
    checkOptions(`${where}: from`, options.from, CONNECTION_NAMES, "{ url: 'redis://127.0.0.1:6379' }");
    this.source = openRegionClient(`${where}: from`, options.from, timeouts);
    this.peers = peerOptions.map((peer) => {
      const opened = openRegionClient(`${where}: to (${peer.region})`, peer, timeouts);
      return { region: peer.region, client: opened.client, owned: opened.owned, persisted: 0, acked: 0, sent: 0, generation: 0, inFlight: 0, keysReplicated: 0, fieldsRaised: 0, pending: 0, sequence: 0, lastLagMs: undefined, maxLagMs: undefined, lastReadAt: undefined, maxReadGapMs: undefined, lastSuccessAt: undefined, lastError: undefined };
    });
    for (const client of [this.source.client, ...this.peers.map((peer) => peer.client)]) client.on('error', () => undefined);
    // A reconnection may reach another server (a restart, a failover): read the epoch and cursors again.
    this.source.client.on('ready', () => {
      if (this.epoch !== undefined) this.resync(undefined);
    });
    this.started = this.start();
    // A failure to start is reported by ready(); the rounds go on trying regardless.
    this.started.catch(() => undefined);
  }

  /** Resolves once started; rejects with {@link StoreUnavailableError} if its own Redis is not up within 5 s (it keeps trying). */
  ready(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StoreUnavailableError(`startReplicator: the Redis of region ${this.region} is not reachable after 5000 ms; check that it is running and the address is right`)), 5_000);
    });
    return Promise.race([this.started, late]).finally(() => clearTimeout(timer));
  }

  /** Waits for the source, reads its epoch and each peer's persisted cursor, then starts the rounds; retries until it can. */
  private async start(): Promise<void> {
    while (!this.closed) {
      if (this.source.client.status !== 'ready') await new Promise((resolve) => this.source.client.once('ready', resolve));
      try {
        await this.sync(undefined);
        if (!this.closed) this.schedule();
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, this.intervalMs));
      }
    }
  }

  /**
   * Reads the source's epoch (writing a new one if it has none: its data is new) and the peers'
   * cursors in it, in one transaction, and sends from there; batches in flight are dropped. A
   * cursor is held to the source's sequence: one past it would skip the changes made next.
   */
  private async sync(reason: SourceReset['reason'] | undefined): Promise<void> {
    const replies = await this.source.client.multi().set(this.keys.epoch, randomUUID(), 'NX').get(this.keys.epoch).get(this.keys.sequence).hgetall(this.keys.cursors).exec();
    const failed = replies?.find(([error]) => error !== null)?.[0];
    if (replies === null || failed !== undefined) throw failed ?? new StoreUnavailableError(`replicator ${this.region}: reading the epoch was aborted`);
    const epoch = String(replies[1]![1]);
    const sequence = Number(replies[2]![1] ?? 0);
    const cursors = replies[3]![1] as Record<string, string>;
    const previousEpoch = this.epoch;
    // Same data, but fewer changes than were sent: an older copy of it (a lagging replica, a snapshot).
    // Either sign holds alone: changes written since the restart can carry the sequence past what was
    // sent before this read, but not the cursors, which only the replicator writes.
    const older = this.peers.some((peer) => peer.sent > sequence || Number(cursors[peer.region] ?? 0) < peer.persisted);
    if (reason === undefined && previousEpoch === epoch && older) reason = 'sequence';
    this.epoch = epoch;
    for (const peer of this.peers) {
      peer.generation += 1;
      peer.acked = Math.min(Number(cursors[peer.region] ?? 0), sequence);
      peer.persisted = peer.acked;
      peer.sent = peer.acked;
      peer.sequence = sequence;
    }
    if (previousEpoch === undefined || (reason === undefined && previousEpoch === epoch)) return;
    const reset: SourceReset = { reason: reason ?? 'epoch', at: Date.now(), previousEpoch, epoch };
    this.sourceResets += 1;
    this.lastSourceReset = reset;
    try {
      this.onSourceReset?.(reset);
    } catch {
      // A reporting hook must not stop the replication.
    }
  }

  /** Reads the epoch and cursors again, once at a time; the rounds retry a failure. */
  private resync(reason: SourceReset['reason'] | undefined): void {
    if (this.syncing !== undefined || this.closed) return;
    this.syncing = this.sync(reason)
      .catch((error: unknown) => {
        for (const peer of this.peers) peer.lastError = error instanceof Error ? error.message : String(error);
      })
      .finally(() => (this.syncing = undefined));
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.rounds += 1;
      for (const peer of this.peers) void this.send(peer);
      if (!this.closed) this.schedule();
    }, this.intervalMs);
  }

  /** One batch to `peer`: read what it was not sent, push it, then acknowledge (in order). */
  private async send(peer: Peer): Promise<void> {
    if (peer.inFlight >= this.maxInFlight || this.closed || this.syncing !== undefined) return;
    const generation = peer.generation;
    const epoch = this.epoch!;
    const readAt = Date.now();
    if (peer.lastReadAt !== undefined) peer.maxReadGapMs = Math.max(peer.maxReadGapMs ?? 0, readAt - peer.lastReadAt);
    peer.lastReadAt = readAt;
    peer.inFlight += 1;
    try {
      const reply = (await evaluate(this.source.client, REGION_PULL_SCRIPT, [this.keys.changes, this.keys.epoch, this.keys.sequence], [this.region, peer.sent, this.batchSize, epoch])) as (string | number)[];
      if (generation !== peer.generation) return;
      if (reply[0] === 'reset') {
        // The source lost data since the cursors were read: read them again, and send from there.
        this.resync(reply[1] === 'sequence' ? 'sequence' : 'epoch');
        return;
      }
      const last = Number(reply[0]);
      peer.pending = Number(reply[1]);
      peer.sequence = Number(reply[2]);
      if (last <= peer.sent) return;
      peer.sent = last;
      // More changed than one batch holds: read the next batch now rather than an interval later.
      if (peer.pending > 0) void this.send(peer);
      const { keys, args } = mergeArguments(reply);
      if (keys.length > 0) {
        const [raised] = (await evaluate(peer.client, REGION_MERGE_SCRIPT, keys, args)) as number[];
        peer.keysReplicated += keys.length;
        peer.fieldsRaised += raised ?? 0;
      }
      if (generation !== peer.generation) return;
      peer.acked = Math.max(peer.acked, last);
      peer.lastLagMs = Date.now() - readAt;
      peer.maxLagMs = Math.max(peer.maxLagMs ?? 0, peer.lastLagMs);
      peer.lastSuccessAt = Date.now();
      peer.lastError = undefined;
      const acked = peer.acked;
      const trimmed = Number(await evaluate(this.source.client, REGION_ACK_SCRIPT, [this.keys.changes, this.keys.cursors, this.keys.epoch], [epoch, peer.region, acked, ...this.peers.map((p) => p.region)]));
      if (trimmed >= 0 && generation === peer.generation) peer.persisted = Math.max(peer.persisted, acked);
    } catch (error) {
      // Send again from what the peer acknowledged: the merge is idempotent, so resending is safe.
      if (generation === peer.generation) {
        peer.generation += 1;
        peer.sent = peer.acked;
      }
      const failure = error instanceof Error ? error : new Error(String(error));
      peer.lastError = failure.message;
      this.onError?.(failure, peer.region);
    } finally {
      peer.inFlight -= 1;
    }
  }

  stats(): ReplicatorStats {
    return {
      region: this.region,
      rounds: this.rounds,
      epoch: this.epoch,
      sourceResets: this.sourceResets,
      lastSourceReset: this.lastSourceReset,
      peers: this.peers.map(({ region, keysReplicated, fieldsRaised, acked, pending, sequence, lastLagMs, maxLagMs, maxReadGapMs, lastSuccessAt, lastError }) => ({
        region,
        keysReplicated,
        fieldsRaised,
        acked,
        pending,
        behind: Math.max(0, sequence - acked),
        lastLagMs,
        maxLagMs,
        maxReadGapMs,
        lastSuccessAt,
        lastError,
      })),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    const owned = [this.source, ...this.peers].filter((connection) => connection.owned).map((connection) => connection.client);
    await Promise.all(owned.map((client) => (client.status === 'ready' ? client.quit().catch(() => client.disconnect()) : client.disconnect())));
  }
}

/** The peers, checked: a non-empty list of distinct regions other than this one, each with one Redis. */
function checkPeers(where: string, region: string, peers: unknown): PeerRegion[] {
  if (!Array.isArray(peers) || peers.length === 0) {
    throw new InvalidOptionError(`${where}: to must be a non-empty list of peer regions like [{ region: 'us', url: 'redis://...' }], got ${describeValue(peers)}`);
  }
  const seen = new Set<string>([region]);
  return peers.map((peer: unknown, index) => {
    checkOptions(`${where}: to[${index}]`, peer, new Set(['region', ...CONNECTION_NAMES]), "{ region: 'us', url: 'redis://127.0.0.1:6379' }");
    const name = checkRegionName(`${where}: to[${index}]`, (peer as PeerRegion).region);
    if (seen.has(name)) {
      throw new InvalidOptionError(`${where}: to[${index}] names region ${JSON.stringify(name)} ${name === region ? 'which is this replicator\'s own region' : 'twice'}; list each other region once`);
    }
    seen.add(name);
    return peer as PeerRegion;
  });
}

/** The merge script's keys and arguments from a pull reply (after its last, pending and sequence: key, ttl, n, then n field/value pairs each). */
export function mergeArguments(reply: readonly (string | number)[]): { keys: string[]; args: (string | number)[] } {
  const keys: string[] = [];
  const args: (string | number)[] = [];
  let at = 3;
  while (at < reply.length) {
    const fields = Number(reply[at + 2]);
    keys.push(String(reply[at]));
    args.push(reply[at + 1]!, fields, ...reply.slice(at + 3, at + 3 + 2 * fields));
    at += 3 + 2 * fields;
  }
  return { keys, args };
}
