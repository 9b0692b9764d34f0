/**
 * Penalties (`blockDuration`) in the memory store: a denial that records starts a block of the
 * key's state, and until the block ends every decision of that state is a denial with reason
 * `blocked`. The block runs from the denial that started it: denials during it do not extend it.
 * The Redis scripts do the same beside the state (scripts/penalty.lua); docs/semantics.md,
 * "Penalties".
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';

/**
 * The answer during a block ending at `until`, from `state`, what the key's state alone would answer
 * (a look): denied, nothing remaining, and a retry at the block's end or at the state's own retry
 * if that is later (a request at the block's end must not be denied again, starting a new block).
 */
export function blockedDecision(state: Decision, until: number, now: number): Decision {
  const stateRetry = state.allowed ? 0 : state.retryAfter;
  return {
    allowed: false,
    limit: state.limit,
    remaining: 0,
    resetAt: Math.max(state.resetAt, until),
    retryAfter: Math.max(until - now, stateRetry),
    now,
    reason: 'blocked',
  };
}

/** Whether `decision` (a committed one) starts a block: a plain denial (no special reason) of a policy with a penalty. */
export function startsBlock(policy: CompiledPolicy, decision: Decision): boolean {
  return policy.blockMs > 0 && !decision.allowed && decision.reason === undefined;
}

interface Block {
  /** The block's end, in the decisions' time. */
  readonly until: number;
  /** The process-clock instant it may be dropped (its end on the store's clock, later for a replay). */
  readonly expires: number;
}

/** The blocks of one memory store, by (state space, key); at most `maxKeys`, the oldest dropped first. */
export class PenaltyBox {
  private readonly blocks = new Map<string, Block>();

  constructor(private readonly maxKeys: number) {}

  /**
   * Decides through `decideState(cost, commit)` (the key's state) unless `key` is blocked at `now`;
   * a committed plain denial starts a block. `shift` turns a time of `now`'s timeline into the process
   * clock's (replay.ts replayShift).
   */
  decide(key: string, policy: CompiledPolicy, now: number, commit: boolean, shift: number, decideState: (commit: boolean) => Decision): Decision {
    const id = blockId(key, policy);
    const held = this.blocks.get(id);
    if (held !== undefined && held.until > now) return blockedDecision(decideState(false), held.until, now);
    const decision = decideState(commit);
    if (!commit || !startsBlock(policy, decision)) return decision;
    const until = now + policy.blockMs;
    this.blocks.delete(id);
    if (this.blocks.size >= this.maxKeys) this.blocks.delete(this.blocks.keys().next().value!);
    this.blocks.set(id, { until, expires: until + shift });
    return { ...blockedDecision(decision, until, now), blockStarted: true };
  }

  /** Lifts `key`'s block under `policy` (a reset). */
  forget(key: string, policy: CompiledPolicy): void {
    this.blocks.delete(blockId(key, policy));
  }

  /** Lifts the blocks of every key starting with `prefix`; answers how many. */
  forgetPrefix(prefix: string): number {
    let lifted = 0;
    for (const id of this.blocks.keys()) {
      if (id.slice(id.indexOf('\u0000') + 1).startsWith(prefix)) {
        this.blocks.delete(id);
        lifted += 1;
      }
    }
    return lifted;
  }

  /** Drops the blocks over by `clock` (the process clock). */
  prune(clock: number): void {
    for (const [id, block] of this.blocks) if (block.expires <= clock) this.blocks.delete(id);
  }
}

function blockId(key: string, policy: CompiledPolicy): string {
  return `${policy.stateId}\u0000${key}`;
}
