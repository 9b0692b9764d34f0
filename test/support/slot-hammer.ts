/**
 * The slot-exactness harness shared by the Redis and memcached stores: `processes` OS processes
 * (test/support/slot-worker.mjs, through the built package) loop acquiring and releasing slots of
 * one key for `ms`, keeping a counter of holders in Redis around each hold; the test reads the
 * counter's peak. Never over the limit means the peak is the limit, and contended for real means
 * some acquires were refused.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { expect } from 'vitest';

const run = promisify(execFile);
const WORKER = new URL('./slot-worker.mjs', import.meta.url).pathname;

/** Hammers `key`'s slots from `processes` processes on the store `storeJson`; asserts the peak is `limit`. */
export async function expectSlotsNeverOverLimit(options: { storeJson: string; counterUrl: string; key: string; limit: number; ms: number; processes: number }): Promise<void> {
  const { storeJson, counterUrl, key, limit, ms, processes } = options;
  const outputs = await Promise.all(Array.from({ length: processes }, () => run(process.execPath, [WORKER, 'hammer', storeJson, counterUrl, key, String(limit), String(ms)])));
  const totals = outputs.map(({ stdout }) => JSON.parse(stdout) as { granted: number; refused: number; failed: number });
  const counter = new Redis(counterUrl);
  const [peak, holders] = await Promise.all([counter.get(`${key}:peak`), counter.get(`${key}:holders`)]);
  counter.disconnect();
  expect(totals.every((total) => total.failed === 0)).toBe(true);
  // Contended for real: the limit was reached, and processes were refused.
  expect(Number(peak)).toBe(limit);
  expect(totals.reduce((sum, total) => sum + total.refused, 0)).toBeGreaterThan(0);
  expect(totals.reduce((sum, total) => sum + total.granted, 0)).toBeGreaterThan(100);
  expect(Number(holders)).toBe(0);
}
