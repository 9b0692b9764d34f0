/**
 * Compare-and-set rounds on one memcached item: read it with `gets`, change it in this process
 * (an operation's own TypeScript: the algorithm's decision, a reservation, a slot), write it back
 * with `cas` (`add` for a fresh item), and start over if another writer got in first, at most
 * `attempts` times. Calls on one item from this process wait in one lane and are applied together,
 * in their order, one read and one write per round: contention on an item is then between
 * processes, not between calls. Every operation is thereby one atomic step on one item.
 */
import { InvalidOptionError } from '../../errors.js';
import type { MemcachedConnection } from './connection.js';
import { exptimeAt } from './keys.js';

/** Most calls one round decides. */
const MAX_ROUND = 128;
/** The largest value written (memcached's default item size is 1 MiB, its key and header included). */
export const MAX_ITEM_BYTES = 1_000_000;

/** How an item's text is read into something an operation changes, and written back. */
export interface ItemCodec<I> {
  /** The item as held (`text` undefined: none yet); `clock` is this node's time of the round. Throws StoreDataError on text Tollgate did not write. */
  decode(key: string, text: string | undefined, clock: number): I;
  encode(item: I): string;
  /** The instant of this node's clock the item must be kept until, for what it holds beside the operations' answers (0: nothing). */
  keepUntil(item: I): number;
}

/** What an operation answers, and the instant of this node's clock its answer needs the item kept until. */
export interface Applied<T> {
  readonly value: T;
  readonly until: number;
}

/** One operation on an item: changes it in place (or throws before changing it) and answers. */
export type ItemOp<I, T> = (item: I, clock: number) => Applied<T>;

interface Waiting {
  readonly codec: ItemCodec<unknown>;
  readonly op: ItemOp<unknown, unknown>;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export class CasLanes {
  private readonly lanes = new Map<string, Waiting[]>();

  constructor(private readonly attempts: number, private readonly exhausted: (key: string) => Error) {}

  /** Applies `op` to the item `key` in one atomic compare-and-set step (with the calls queued beside it). */
  run<I, T>(connection: MemcachedConnection, key: string, codec: ItemCodec<I>, op: ItemOp<I, T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiting: Waiting = { codec: codec as ItemCodec<unknown>, op: op as ItemOp<unknown, unknown>, resolve: resolve as (value: unknown) => void, reject };
      const lane = this.lanes.get(key);
      if (lane !== undefined) {
        lane.push(waiting);
        return;
      }
      this.lanes.set(key, [waiting]);
      void this.drain(connection, key);
    });
  }

  /** Decides the lane's calls round after round until it is empty. */
  private async drain(connection: MemcachedConnection, key: string): Promise<void> {
    const lane = this.lanes.get(key)!;
    while (lane.length > 0) {
      const round = lane.splice(0, MAX_ROUND);
      try {
        const outcomes = await this.round(connection, key, round);
        for (const [index, waiting] of round.entries()) {
          const outcome = outcomes[index]!;
          if (outcome.ok) waiting.resolve(outcome.value);
          else waiting.reject(outcome.error);
        }
      } catch (error) {
        for (const waiting of round) waiting.reject(error);
      }
    }
    this.lanes.delete(key);
  }

  /** One read-change-write of `round`, again while another writer gets in first. */
  private async round(connection: MemcachedConnection, key: string, round: readonly Waiting[]): Promise<Outcome[]> {
    const codec = round[0]!.codec;
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const held = await connection.gets(key);
      const clock = Date.now();
      const item = codec.decode(key, held?.value, clock);
      const before = codec.encode(item);
      let until = 0;
      const outcomes = round.map((waiting): Outcome => {
        try {
          const applied = waiting.op(item, clock);
          until = Math.max(until, applied.until);
          return { ok: true, value: applied.value };
        } catch (error) {
          return { ok: false, error };
        }
      });
      const after = codec.encode(item);
      // Nothing changed (denials, looks, costs past the capacity): nothing to write.
      if (after === before) return outcomes;
      if (after.length > MAX_ITEM_BYTES) throw new InvalidOptionError(`memcached item ${key} would hold ${after.length} bytes, past the ${MAX_ITEM_BYTES} a memcached item holds by default: fewer slots or open reservations per key, or the Redis store`);
      const ttl = exptimeAt(Math.max(until, codec.keepUntil(item)));
      const reply = held === undefined ? await connection.add(key, after, ttl) : await connection.cas(key, after, ttl, held.cas);
      if (reply === 'STORED') return outcomes;
      // Another node wrote first: read again. A little jitter past the first retries spreads the racers out.
      if (attempt >= 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(attempt, 10)));
    }
    throw this.exhausted(key);
  }
}
