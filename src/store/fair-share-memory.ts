/**
 * Fair shares in the memory store: one group state (algorithms/fair-share.ts) per (group, window),
 * beside the store's slots. Single-threaded, so each decision reads and writes its group
 * atomically. Bounded: at most `maxGroups` groups (the store's maxKeys), each of at most
 * SHARE_RANGES.tenants active tenants; a group idle for a window past its last window is dropped,
 * and when full the least recently decided group goes first (its tenants start afresh).
 */
import { decideShare, forgetShareTenant, freshShareGroup, type ShareGroupState } from '../algorithms/fair-share.js';
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';

interface HeldGroup {
  readonly state: ShareGroupState;
  /** Process-clock instant after which the group holds nothing a decision needs. */
  expires: number;
}

export class MemoryShares {
  /** By state id (the window and the group), least recently decided first. */
  private readonly groups = new Map<string, HeldGroup>();

  constructor(private readonly maxGroups: number) {}

  /** `shift`: what turns a time of the decision's timeline into the process clock (replay.ts). */
  decide(key: string, policy: CompiledPolicy, cost: number, now: number, commit: boolean, shift: number): Decision {
    const name = groupName(policy);
    const held = this.groups.get(name);
    if (held === undefined) {
      const state = freshShareGroup();
      const decision = decideShare(state, key, now, cost, policy, commit);
      if (commit) this.hold(name, { state, expires: 0 }, now, policy, shift);
      return decision;
    }
    const decision = decideShare(held.state, key, now, cost, policy, commit);
    if (commit) {
      this.groups.delete(name);
      this.hold(name, held, now, policy, shift);
    }
    return decision;
  }

  /** Forgets tenant `key` of its group under `policy`. */
  forget(key: string, policy: CompiledPolicy): void {
    const held = this.groups.get(groupName(policy));
    if (held !== undefined) forgetShareTenant(held.state, key);
  }

  /** Groups held (tests, stats). */
  get size(): number {
    return this.groups.size;
  }

  private hold(name: string, held: HeldGroup, now: number, policy: CompiledPolicy, shift: number): void {
    // Its window ends within a window of `now`, and its tenants go idle a window after they asked.
    held.expires = Math.max(held.expires, now + 2 * policy.windowMs + shift);
    if (this.groups.size >= this.maxGroups) this.makeRoom();
    this.groups.set(name, held);
  }

  private makeRoom(): void {
    const clock = Date.now();
    for (const [name, held] of this.groups) if (held.expires <= clock) this.groups.delete(name);
    for (const name of this.groups.keys()) {
      if (this.groups.size < this.maxGroups) break;
      this.groups.delete(name);
    }
  }
}

/** The state id names the group (policy.ts). */
function groupName(policy: CompiledPolicy): string {
  return policy.stateId;
}
