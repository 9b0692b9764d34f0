/**
 * On a Cluster, the script calls of one tick bound for one master go out together: one pipeline,
 * so one write from Node and one read (and one reply write) on Redis's side for them all, instead of
 * one round of I/O per call. Spread keys make one call per hash slot, often of a single decision;
 * a script call still cannot span slots, but its I/O is shared with the other slots of its master.
 */
import calculateSlot from 'cluster-key-slot';
import type { Cluster } from 'ioredis';
import type { Pending } from './script-call.js';

/** One script call to make: a batch of requests sharing a slot and a clock. */
export interface Call {
  readonly timeKey: string;
  readonly batch: Pending[];
}

/** A call as sent: EVALSHA of `sha1`, or FCALL of `fcall` when it is set. */
export interface Command {
  readonly sha1: string;
  readonly fcall: string | undefined;
  readonly keys: string[];
  readonly args: (string | number)[];
}

/**
 * Replies that mean the script did not run there (redirected, a slot on the move, the cluster
 * down for a moment, the script or function not loaded): the call is made again on its own, where
 * the store's plain path follows redirections and loads what is missing, as before pipelining.
 */
export const NOT_RUN = /^(ReplyError: )?(MOVED|ASK|TRYAGAIN|CLUSTERDOWN|NOSCRIPT|NOPERM)\b|Function not found|unknown command/;

/**
 * `calls` grouped by the master serving their slot (ioredis's slot table), in order; a call whose
 * slot has no known master yet is a group of its own.
 */
export function byMaster(cluster: Cluster, calls: readonly Call[]): Call[][] {
  const groups = new Map<string, Call[]>();
  const alone: Call[][] = [];
  for (const call of calls) {
    const master = cluster.slots[calculateSlot(call.batch[0]!.keys[0]!)]?.[0];
    if (master === undefined) {
      alone.push([call]);
      continue;
    }
    const group = groups.get(master);
    if (group === undefined) groups.set(master, [call]);
    else group.push(call);
  }
  return [...groups.values(), ...alone];
}

/**
 * Sends `commands` (all bound for one master) in one pipeline; resolves to each one's error or
 * reply, in order. Rejects only if ioredis refused the pipeline before sending anything (the slot
 * table changed under it): each call may then be made on its own.
 */
export async function pipelined(cluster: Cluster, commands: readonly Command[]): Promise<[Error | null, unknown][]> {
  const pipeline = cluster.pipeline();
  for (const { sha1, fcall, keys, args } of commands) {
    if (fcall !== undefined) pipeline.fcall(fcall, keys.length, ...keys, ...args);
    else pipeline.evalsha(sha1, keys.length, ...keys, ...args);
  }
  const results = await pipeline.exec();
  if (results === null || results.length !== commands.length) throw new Error('the pipeline was not sent');
  return results;
}
