/**
 * The memory store's state spaces: a small number for each state (algorithm, window start,
 * precision and window: CompiledPolicy.stateId) of which the store holds keys, so its hash table
 * and arrays index state by number, not by string.
 *
 * A space lives while it holds keys: the first key stored under a state takes a number, and the
 * number is freed when the state's last key goes (expired, evicted or reset). So there are never
 * more spaces than keys held (at most `maxKeys`), whatever windows callers name, and a policy in use
 * keeps its space as long as it keeps a key. A freed number may be given to another state, but
 * only once no key holds it: no two states ever share one while either has a key, so a key is
 * always found under its own state's counters or not at all (issue 27).
 */
import type { CompiledPolicy } from '../policy.js';

/** Policies remembered with their spaces, looked up before the map: a group's few policies, or one hot one. */
const RECENT = 4;

export class StateSpaces {
  private readonly byState = new Map<string, number>();
  private readonly stateIds: string[] = [];
  /** Per space: the last policy that stored a key in it (how eviction reads a slot's state). */
  private readonly policies: (CompiledPolicy | undefined)[] = [];
  /** Per space: how many keys it holds. */
  private readonly keyCounts: number[] = [];
  private readonly freed: number[] = [];
  /** The last policies looked up and their spaces: hot paths pass the same few policy objects. */
  private readonly recentPolicies: (CompiledPolicy | undefined)[] = new Array<undefined>(RECENT).fill(undefined);
  private readonly recentSpaces: number[] = new Array<number>(RECENT).fill(-1);
  private nextRecent = 0;

  /** Spaces that hold keys. */
  get size(): number {
    return this.byState.size;
  }

  /** The space of `policy`'s state, or -1 when the store holds no key of it. */
  find(policy: CompiledPolicy): number {
    const recent = this.recentPolicies;
    for (let i = 0; i < RECENT; i++) if (recent[i] === policy) return this.recentSpaces[i]!;
    const space = this.byState.get(policy.stateId);
    if (space === undefined) return -1;
    this.remember(policy, space);
    return space;
  }

  /** Counts a new key into `policy`'s space, taking a number for it if it has none; returns the space. */
  enter(policy: CompiledPolicy): number {
    let space = this.find(policy);
    if (space < 0) {
      space = this.freed.pop() ?? this.stateIds.length;
      this.byState.set(policy.stateId, space);
      this.stateIds[space] = policy.stateId;
      this.keyCounts[space] = 0;
      this.remember(policy, space);
    }
    this.keyCounts[space]! += 1;
    this.policies[space] = policy;
    return space;
  }

  /** A key of `space` is gone; with its last key the space is freed. */
  leave(space: number): void {
    if ((this.keyCounts[space]! -= 1) > 0) return;
    this.byState.delete(this.stateIds[space]!);
    this.policies[space] = undefined;
    this.freed.push(space);
    // A policy remembered with a freed space would find another state's keys once the number is reused.
    for (let i = 0; i < RECENT; i++) {
      if (this.recentSpaces[i] === space) {
        this.recentPolicies[i] = undefined;
        this.recentSpaces[i] = -1;
      }
    }
  }

  private remember(policy: CompiledPolicy, space: number): void {
    this.recentPolicies[this.nextRecent] = policy;
    this.recentSpaces[this.nextRecent] = space;
    this.nextRecent = (this.nextRecent + 1) % RECENT;
  }

  /** The last policy that stored a key in `space` (a space that holds keys). */
  policyOf(space: number): CompiledPolicy {
    return this.policies[space]!;
  }
}
