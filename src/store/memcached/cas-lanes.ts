/**
 * The algorithms that keep more than a counter (token bucket, leaky bucket, GCRA, sliding window,
 * first-hit and calendar fixed windows) on memcached: read the state with `gets`, decide with the
 * algorithm's own code (src/algorithms), write it back with `cas` (`add` for a fresh key), and
 * start over if another writer got in first, at most `attempts` times. Calls on one key from this
 * process wait in one lane and are decided together, one read and one write per round: contention
 * on a key is then between processes, not between calls.
 */
import { slotAlgorithms } from '../../algorithms/registry.js';
import { decideSlidingBuckets } from '../../algorithms/sliding-window-buckets.js';
import type { Decision } from '../../decision.js';
import type { CompiledPolicy } from '../../policy.js';
import type { MemcachedConnection } from './connection.js';
import { decodeState, encodeState, exptime, laterExptime, stateSize } from './keys.js';

/** Most calls one round decides. */
const MAX_ROUND = 128;

interface Waiting {
  readonly policy: CompiledPolicy;
  readonly cost: number;
  /** The call's explicit time, or undefined: this node's clock at the round. */
  readonly now: number | undefined;
  resolve(decision: Decision): void;
  reject(error: unknown): void;
}

/** `policy`'s algorithm on `state` (from index 0). */
export function decideState(state: Float64Array, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision {
  if (policy.precision > 1) return decideSlidingBuckets(state, 0, now, cost, policy, commit);
  return slotAlgorithms[policy.algorithm as keyof typeof slotAlgorithms].decide(state, 0, now, cost, policy, commit);
}

/** A look at `key`'s state: what a call of `cost` would get, nothing written. */
export async function peekState(connection: MemcachedConnection, key: string, policy: CompiledPolicy, cost: number, now: number): Promise<Decision> {
  const state = new Float64Array(stateSize(policy));
  const text = await connection.get(key);
  if (text !== undefined) decodeState(key, text, state);
  return decideState(state, now, cost, policy, false);
}

export class CasLanes {
  private readonly lanes = new Map<string, Waiting[]>();

  constructor(private readonly attempts: number, private readonly exhausted: (key: string) => Error) {}

  consume(connection: MemcachedConnection, key: string, policy: CompiledPolicy, cost: number, now: number | undefined): Promise<Decision> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { policy, cost, now, resolve, reject };
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
        const decisions = await this.round(connection, key, round);
        for (const [index, waiting] of round.entries()) waiting.resolve(decisions[index]!);
      } catch (error) {
        for (const waiting of round) waiting.reject(error);
      }
    }
    this.lanes.delete(key);
  }

  /** One read-decide-write of `round`, again while another writer gets in first. */
  private async round(connection: MemcachedConnection, key: string, round: readonly Waiting[]): Promise<Decision[]> {
    const state = new Float64Array(stateSize(round[0]!.policy));
    for (let attempt = 1; attempt <= this.attempts; attempt++) {
      const held = await connection.gets(key);
      if (held === undefined) state.fill(0);
      else decodeState(key, held.value, state);
      const before = encodeState(state);
      const clock = Date.now();
      let ttl = 1;
      const decisions = round.map((waiting) => {
        const at = waiting.now ?? clock;
        const decision = decideState(state, at, waiting.cost, waiting.policy, true);
        ttl = laterExptime(ttl, exptime(decision.resetAt, at, waiting.now !== undefined));
        return decision;
      });
      const after = encodeState(state);
      // Nothing recorded (denials, or costs past the capacity): nothing to write.
      if (after === before) return decisions;
      const reply = held === undefined ? await connection.add(key, after, ttl) : await connection.cas(key, after, ttl, held.cas);
      if (reply === 'STORED') return decisions;
      // Another node wrote first: read again. A little jitter past the first retries spreads the racers out.
      if (attempt >= 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(attempt, 10)));
    }
    throw this.exhausted(key);
  }
}
