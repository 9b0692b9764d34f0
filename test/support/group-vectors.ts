/**
 * Plays the group conformance vectors in test/vectors/groups/*.json (limits decided together with
 * `limitAll`, some naming the same state twice) against any Store, through the public limiter API.
 * Every store (memory, Redis, Redis Cluster) must pass the very same files.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { compilePolicy, createLimiter, type Decision, type Policy, type Store } from '../../src/index.js';

/** One limit of a case: its key (made unique per run) and policy. */
interface GroupLimit {
  readonly key: string;
  readonly policy: Policy;
}

interface GroupStep {
  /** `limitAll` (default) of every limit, or a `look` at limit `limit` alone. */
  readonly op?: 'limitAll' | 'look';
  readonly now: number;
  /** Per limit (limitAll); default 1 each. */
  readonly costs?: readonly number[];
  readonly limit?: number;
  /** Per limit (limitAll), or the look's decision. */
  readonly expect: readonly Partial<Decision>[] | Partial<Decision>;
}

interface GroupCase {
  readonly name: string;
  readonly limits: readonly GroupLimit[];
  readonly steps: readonly GroupStep[];
}

const VECTOR_DIR = new URL('../vectors/groups/', import.meta.url);

function pick(decision: Decision, expected: Partial<Decision>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(expected).map((field) => [field, decision[field as keyof Decision]]));
}

/**
 * Registers one test per group vector case; `openStore` gives a store per case. `algorithms`: only
 * the cases all of whose limits use one of them and carry no penalty (a store that decides only
 * some, such as the multi-region store, which refuses `blockDuration`). `sharedStates` false: only
 * the cases whose limits name distinct states (the Memcached store refuses a state named twice);
 * `penalties` true: the cases with `blockDuration` too (with `algorithms`).
 */
export function describeGroupVectors(storeName: string, openStore: () => Store | Promise<Store>, algorithms?: readonly string[], sharedStates = true, penalties = false): void {
  const decided = (c: GroupCase): boolean =>
    (algorithms === undefined || c.limits.every((limit) => algorithms.includes(limit.policy.algorithm) && (penalties || limit.policy.blockDuration === undefined))) && (sharedStates || !namesAStateTwice(c));
  for (const file of readdirSync(VECTOR_DIR).filter((name) => name.endsWith('.json')).sort()) {
    const cases = (JSON.parse(readFileSync(new URL(file, VECTOR_DIR), 'utf8')) as { cases: GroupCase[] }).cases.filter(decided);
    if (cases.length === 0) continue;
    describe(`${storeName} group conformance: ${file}`, () => {
      for (const vectorCase of cases) {
        it(vectorCase.name, async () => {
          const limiter = createLimiter({ store: await openStore(), deadlineMs: 5_000 });
          const run = Math.random().toString(36).slice(2);
          const requests = vectorCase.limits.map((limit) => ({ key: `group:${run}:${limit.key}`, policy: limit.policy }));
          try {
            for (const [index, step] of vectorCase.steps.entries()) {
              const where = `step ${index} (${step.op ?? 'limitAll'} at now=${step.now})`;
              if (step.op === 'look') {
                const { key, policy } = requests[step.limit ?? 0]!;
                const expected = step.expect as Partial<Decision>;
                expect(pick(await limiter.look(key, policy, { now: step.now }), expected), where).toEqual(expected);
                continue;
              }
              const decisions = await limiter.limitAll(requests.map((request, i) => ({ ...request, cost: step.costs?.[i] ?? 1 })), { now: step.now });
              const expected = step.expect as readonly Partial<Decision>[];
              expect(decisions.map((decision, i) => pick(decision, expected[i]!)), where).toEqual(expected);
            }
          } finally {
            await limiter.close();
          }
        });
      }
    });
  }
}

/** Whether two limits of a case name one state: one key, one algorithm and window. */
function namesAStateTwice(c: GroupCase): boolean {
  const states = c.limits.map((limit) => `${limit.key}\u0000${compilePolicy(limit.policy).stateId}`);
  return new Set(states).size < states.length;
}
