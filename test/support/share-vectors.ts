/**
 * Plays the fair-share conformance vectors in test/vectors/shares/*.json against any Store, through
 * the public limiter API: each step names its tenant (a key) and weight; the case's policy gets a
 * `share` of a group made unique per run. Every store (memory, Redis, Redis Cluster) must pass the
 * very same files.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type LimiterOptions, type Policy, type Store } from '../../src/index.js';

interface ShareStep {
  readonly op?: 'limit' | 'peek' | 'reset';
  readonly key: string;
  readonly weight: number;
  readonly now: number;
  readonly cost?: number;
  readonly expect?: Partial<Decision>;
}

interface ShareCase {
  readonly name: string;
  readonly policy: Omit<Policy, 'share'>;
  readonly steps: readonly ShareStep[];
}

const VECTOR_DIR = new URL('../vectors/shares/', import.meta.url);

/** Registers one test per fair-share vector case; `openStore` gives a store per case. */
export function describeShareVectors(storeName: string, openStore: () => Store | Promise<Store>, limiterOptions: Omit<LimiterOptions, 'store'> = {}): void {
  for (const file of readdirSync(VECTOR_DIR).filter((name) => name.endsWith('.json')).sort()) {
    const { cases } = JSON.parse(readFileSync(new URL(file, VECTOR_DIR), 'utf8')) as { cases: ShareCase[] };
    describe(`${storeName} fair-share conformance: ${file}`, () => {
      for (const vectorCase of cases) {
        it(vectorCase.name, async () => {
          const limiter = createLimiter({ store: await openStore(), deadlineMs: 5_000, ...limiterOptions });
          const run = Math.random().toString(36).slice(2);
          try {
            for (const [index, step] of vectorCase.steps.entries()) {
              const where = `step ${index} (${step.op ?? 'limit'} of ${step.key} at now=${step.now}, cost=${step.cost ?? 1})`;
              const key = `share:${run}:${step.key}`;
              const policy = { ...vectorCase.policy, share: { group: `vectors-${run}`, weight: step.weight } } as Policy;
              if (step.op === 'reset') {
                await limiter.reset(key, policy);
                continue;
              }
              const options = { now: step.now, cost: step.cost ?? 1 };
              const decision = step.op === 'peek' ? await limiter.peek(key, policy, options) : await limiter.limit(key, policy, options);
              const expected = step.expect ?? {};
              expect(Object.fromEntries(Object.keys(expected).map((field) => [field, decision[field as keyof Decision]])), where).toEqual(expected);
              if (expected.reason === undefined) expect(decision.reason, `${where}: unexpected reason`).toBeUndefined();
            }
          } finally {
            await limiter.close();
          }
        });
      }
    });
  }
}
