/**
 * How long the memory store keeps a key decided at an explicit `now` (a replay, a test's clock):
 * as long as Redis would, so both stores forget the same keys.
 */
/** How far an explicit `now` may lag the process clock and still keep its keys that much longer. */
const MAX_REPLAY_LAG_MS = 3_600_000;
/** Real time a key decided at an explicit `now` is kept past its lifetime, as on Redis. */
const REPLAY_SLACK_MS = 1_000;

/**
 * What to add to a `resetAt` decided at an explicit `now` to get the process-clock instant its key
 * may be reclaimed: the key lives its lifetime in real time, plus how far `now` lags the clock (at
 * most an hour), plus a second — what Redis keeps it for (decide.lua's extra_ttl, docs/redis.md),
 * so a replay, however its timelines mix, keeps every key Redis keeps.
 */
export function replayShift(now: number): number {
  const clock = Date.now();
  const lag = Math.min(Math.max(clock - now, 0), MAX_REPLAY_LAG_MS);
  return clock - now + lag + REPLAY_SLACK_MS;
}
