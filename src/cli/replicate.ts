/**
 * `tollgate replicate`: the replicator of one region (src/store/region/replicate.ts) as a process.
 * Its flags are checked here, each bad one an error naming the flag and what to give instead.
 */
import { InvalidOptionError } from '../errors.js';
import { checkWholeNumberText } from '../options.js';
import { startReplicator, type Replicator, type ReplicatorOptions } from '../store/region/replicate.js';
import { checkRegionName } from '../store/region/shared.js';

/** The command's flags, for `parseArgs`. */
export const REPLICATE_FLAGS = {
  region: { type: 'string' },
  redis: { type: 'string' },
  peer: { type: 'string', multiple: true },
  'interval-ms': { type: 'string' },
  'key-prefix': { type: 'string' },
} as const;

/** The flags as `parseArgs` gives them. */
export interface ReplicateFlags {
  readonly region?: string;
  readonly redis?: string;
  readonly peer?: readonly string[];
  readonly 'interval-ms'?: string;
  readonly 'key-prefix'?: string;
}

const REDIS_URL = /^rediss?:\/\/\S+$/;
/** Longest replication interval: past a minute, regions would decide on data a whole window old. */
const MAX_INTERVAL_MS = 60_000;

/** The replicator's options from the flags; throws {@link InvalidOptionError} naming the flag at fault. */
export function replicateOptions(flags: ReplicateFlags): ReplicatorOptions {
  if (flags.region === undefined) throw new InvalidOptionError('replicate: --region NAME is required: the region whose counts this process carries (e.g. --region eu)');
  const region = checkRegionName('replicate: --region', flags.region);
  if (flags.redis === undefined || !REDIS_URL.test(flags.redis)) {
    throw new InvalidOptionError(`replicate: --redis must be the region's own Redis as redis://host:port, got ${flags.redis === undefined ? 'nothing' : JSON.stringify(flags.redis)}`);
  }
  const peers = (flags.peer ?? []).map((text) => {
    const match = /^([^=]+)=(.*)$/.exec(text);
    if (match === null || !REDIS_URL.test(match[2]!)) {
      throw new InvalidOptionError(`replicate: --peer must be REGION=redis://host:port (e.g. --peer us=redis://10.0.0.2:6379), got ${JSON.stringify(text)}`);
    }
    const peer = checkRegionName(`replicate: --peer ${text}`, match[1]);
    if (peer === region) throw new InvalidOptionError(`replicate: --peer ${text} names this replicator's own region; give the other regions`);
    return { region: peer, url: match[2]! };
  });
  const repeated = peers.find((peer, index) => peers.findIndex((other) => other.region === peer.region) !== index);
  if (repeated !== undefined) throw new InvalidOptionError(`replicate: --peer names region ${repeated.region} twice; give each other region once`);
  if (peers.length === 0) throw new InvalidOptionError('replicate: give at least one --peer REGION=redis://host:port (repeat it for each other region)');
  const intervalText = flags['interval-ms'];
  const intervalMs = intervalText === undefined ? undefined : checkWholeNumberText(intervalText, { name: 'replicate: --interval-ms', min: 1, max: MAX_INTERVAL_MS, unit: 'ms' });
  return {
    region,
    from: { url: flags.redis },
    to: peers,
    ...(intervalMs === undefined ? {} : { intervalMs }),
    ...(flags['key-prefix'] === undefined ? {} : { keyPrefix: flags['key-prefix'] }),
  };
}

/**
 * Starts the replicator the flags describe (checked by {@link startReplicator} too: region names,
 * a peer naming this region). Failures of a peer are written to `report`, once per new message, and
 * so is each loss of data seen at the region's own Redis.
 */
export function startReplicateCommand(flags: ReplicateFlags, report: (line: string) => void): Replicator {
  const lastErrors = new Map<string, string>();
  const options = replicateOptions(flags);
  return startReplicator({
    ...options,
    onError: (error, peer) => {
      if (lastErrors.get(peer) === error.message) return;
      lastErrors.set(peer, error.message);
      report(`tollgate replicate: sending to ${peer} failed (retrying every interval): ${error.message}`);
    },
    onSourceReset: (reset) => {
      const what = reset.reason === 'epoch' ? 'lost its data (restarted without persistence, or flushed)' : 'holds fewer changes than were sent (a replica that lagged took over)';
      report(`tollgate replicate: the Redis of region ${options.region} ${what}; sending its changes again from the cursors it holds (epoch ${reset.previousEpoch ?? 'none'} -> ${reset.epoch})`);
    },
  });
}
