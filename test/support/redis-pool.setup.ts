/**
 * Global setup of the `suite` project: a directory for the Redis pool of ./redis-pool.ts, provided
 * to the test files, and the teardown that stops the servers the files started in it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { slotRecords, stopRecorded } from './redis-pool.js';

export default function setup(project: TestProject): () => void {
  const pool = mkdtempSync(join(tmpdir(), 'tollgate-redis-pool-'));
  project.provide('redisPool', pool);
  return () => {
    stopRecorded(slotRecords(pool));
    rmSync(pool, { recursive: true, force: true });
  };
}
