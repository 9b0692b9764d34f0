/**
 * The shape every algorithm shares. An algorithm is a pure state machine: given the stored state,
 * `now`, a cost and a compiled policy it returns the decision and (when `commit` is true) writes the
 * next state in place. No I/O, no clock reads: `now` always comes from the caller.
 */
import type { Decision } from '../decision.js';
import type { CompiledPolicy } from '../policy.js';

/**
 * An algorithm whose state is a fixed number of doubles. All zeros is the fresh state, so a store
 * can hand out zeroed slots without knowing the algorithm.
 */
export interface SlotAlgorithm {
  /** How many doubles of state one key needs. */
  readonly stateSize: number;
  /**
   * Decides one request. Reads `state[at .. at + stateSize)`; writes the next state there only
   * when `commit` is true (peek passes false).
   */
  decide(state: Float64Array, at: number, now: number, cost: number, policy: CompiledPolicy, commit: boolean): Decision;
}
