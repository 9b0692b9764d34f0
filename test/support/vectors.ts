/**
 * Plays the conformance vectors in test/vectors/*.json against any Store, through the public
 * limiter API. Every store (memory, Redis, Redis Cluster) must pass the very same files.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type LimiterOptions, type Policy, type Store } from '../../src/index.js';

export interface VectorStep {
  readonly op?: 'limit' | 'peek' | 'reset';
  readonly now: number;
  readonly cost?: number;
  readonly expect?: Partial<Decision>;
}

export interface VectorCase {
  readonly name: string;
  readonly policy: Policy;
  readonly steps: readonly VectorStep[];
}

export interface VectorFile {
  readonly algorithm: string;
  readonly cases: readonly VectorCase[];
}

const VECTOR_DIR = new URL('../vectors/', import.meta.url);
/** The penalties' vectors (`blockDuration`), every algorithm in one file. */
export const BLOCK_VECTOR_DIR = new URL('../vectors/blocks/', import.meta.url);

/** Every vector file of `dir` (default: the algorithms'), by file name. */
export function loadVectors(dir: URL = VECTOR_DIR): { file: string; vectors: VectorFile }[] {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((file) => ({ file, vectors: JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as VectorFile }));
}

/**
 * Registers one test per vector case. `openStore` gives a store per case; each case uses its own
 * key, so a store may be shared. `pauseMs` lets that much real time pass before each step: the
 * steps' explicit `now` must mean the same however much real time passes (keys that live in real
 * time, as on Redis, must not expire under a replay).
 */
export function describeVectors(
  storeName: string,
  openStore: () => Store | Promise<Store>,
  pauseMs = 0,
  limiterOptions: Omit<LimiterOptions, 'store'> = {},
  dir: URL = VECTOR_DIR,
  /** Which files to play (default: all); a store without an algorithm leaves its file out. */
  playFile: (file: string) => boolean = () => true,
  /** Which cases of a file to play (default: all); a store without an algorithm leaves its cases out. */
  playCase: (vectorCase: VectorCase) => boolean = () => true,
): void {
  for (const { file, vectors } of loadVectors(dir).filter(({ file }) => playFile(file))) {
    describe(`${storeName} conformance: ${file}`, () => {
      vectors.cases.forEach((vectorCase, index) => {
        if (!playCase(vectorCase)) return;
        it(vectorCase.name, async () => {
          const store = await openStore();
          // A vector checks what the store decides, not how fast: a generous deadline keeps a loaded
          // machine's slow Redis reply from being answered by the failure mode instead.
          const limiter = createLimiter({ store, deadlineMs: 5_000, ...limiterOptions });
          const key = `vector:${file}:${index}:${Math.random().toString(36).slice(2)}`;
          try {
            for (const [stepIndex, step] of vectorCase.steps.entries()) {
              if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
              const where = `step ${stepIndex} (${step.op ?? 'limit'} at now=${step.now}, cost=${step.cost ?? 1})`;
              if (step.op === 'reset') {
                await limiter.reset(key, vectorCase.policy);
                continue;
              }
              const options = { now: step.now, cost: step.cost ?? 1 };
              const decision =
                step.op === 'peek'
                  ? await limiter.peek(key, vectorCase.policy, options)
                  : await limiter.limit(key, vectorCase.policy, options);
              const actual: Record<string, unknown> = {};
              for (const field of Object.keys(step.expect ?? {})) actual[field] = decision[field as keyof Decision];
              expect(actual, where).toEqual(step.expect ?? {});
              if (step.expect !== undefined && step.expect.reason === undefined) {
                expect(decision.reason, `${where}: unexpected reason`).toBeUndefined();
              }
            }
          } finally {
            await limiter.close();
          }
        });
      });
    });
  }
}
