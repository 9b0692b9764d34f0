/**
 * On a Redis Cluster, the decisions of one tick bound for one master are decided by one call, not
 * one per hash slot: a Redis Functions library (scripts/cross-slot.lua in front of decide.lua, the
 * same Lua as the single server's batch) whose function may touch keys of several slots that its
 * node serves (`allow-cross-slot-keys`), called with numkeys 0 (the keys in its arguments) on that
 * master's own connection. Spread keys then pay one FCALL per master per tick instead of one per
 * check. A group whose slot is not served there right now (a stale slot table, a slot being
 * migrated) is left out by the script before anything is written, and decided again through the
 * per-slot path, which follows the redirections. Without Functions (Redis < 7, an ACL refusing
 * them) every call takes the per-slot path.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import { loadLibrary } from './functions.js';
import { DECIDE_SCRIPT } from './lua.js';
import type { Call } from './pipeline.js';
import { deliver, scriptCall, type Pending } from './script-call.js';

/** What the cross-slot calls need of the store. */
export interface CrossSlotHost {
  readonly client: Redis | Cluster;
  readonly address: string;
  readonly callerClock: boolean;
  readonly maxBatch: number;
  /** The per-slot path (one script call per slot, each redirected on its own). */
  readonly bySlot: (calls: readonly Call[]) => void;
  /** A call's failure as the store reports it (a slot moving, refused arguments, an outage). */
  readonly fail: (timeKey: string, batch: Pending[], error: unknown) => void;
  /** Counts calls in flight: +1 when one is sent, -1 when it is answered. */
  readonly busy: (delta: number) => void;
}

/** Where decide.lua's driver starts in the batch script's source (lua.ts composes it last). */
const DRIVER = '-- ==== decide.lua ====\n';

/**
 * The library: the batch script's source (lua.ts DECIDE_SCRIPT) split before its driver: the
 * algorithm files are built once, at the first call after a load (Redis 7.0 lets a library's load
 * step reach no global but `redis`), and return decide.lua as `decide_batch(KEYS, ARGV)`, run per
 * call; cross-slot.lua's gate in front of it; one function.
 */
export const CROSS_SLOT_LIBRARY = (() => {
  const gate = readFileSync(new URL('./scripts/cross-slot.lua', import.meta.url), 'utf8');
  const at = DECIDE_SCRIPT.source.indexOf(DRIVER);
  if (at < 0) throw new Error('the batch script has no decide.lua section');
  const helpers = DECIDE_SCRIPT.source.slice(0, at);
  const driver = DECIDE_SCRIPT.source.slice(at);
  const body = ['local decide_batch', `local function build()\n${helpers}\nreturn function(KEYS, ARGV)\n${driver}\nend\nend`, `-- ==== cross-slot.lua ====\n${gate}`].join('\n');
  // Named by its source's hash: two versions of Tollgate on one Cluster each call their own.
  const name = `tollgate_xs_${createHash('sha1').update(body).digest('hex').slice(0, 12)}`;
  const callback = 'function(_, args)\n  decide_batch = decide_batch or build()\n  return cross_slot(args)\nend';
  const register = `redis.register_function{function_name='${name}', callback=${callback}, flags={'allow-cross-slot-keys'}}`;
  return { name, source: [`#!lua name=${name}`, body, register].join('\n') };
})();

/** A node without the library (FUNCTION FLUSH, a master that joined later): load it there, decide per slot meanwhile. */
const NOT_LOADED = /Function not found/i;
/**
 * Redis will not run the function for us: before 7.0, or an ACL without FCALL (refused before it
 * ran; a NOPERM for a command inside the script comes after writes, and is reported instead).
 */
const REFUSED = /^(ReplyError: )?NOPERM\b.*'fcall'|unknown command/i;
/** Replies that mean nothing ran (the call was refused whole, or never written): safe to decide again. */
const NOTHING_RAN = /^(ReplyError: )?(READONLY|OOM|BUSY|LOADING|MASTERDOWN|CLUSTERDOWN|MOVED|ASK|TRYAGAIN)\b|Stream isn't writeable/;

export class CrossSlotCalls {
  /** False on a single server, a client with an ioredis keyPrefix, or once Redis refused the library: every call then goes per slot. */
  private usable: boolean;
  private readonly cluster: Cluster;

  constructor(private readonly host: CrossSlotHost) {
    // ioredis prefixes declared keys only: with its keyPrefix, keys among the arguments would not be.
    this.usable = host.client instanceof Cluster && !host.client.options.keyPrefix;
    this.cluster = host.client as Cluster;
  }

  /** Loads the library on every master of a Cluster; never rejects. */
  async load(): Promise<void> {
    if (this.usable) await Promise.all(this.cluster.nodes('master').map((node) => this.loadOn(node)));
  }

  /**
   * Sends `tick` (a tick's calls, in the order made, tick.ts): one call per master and call of the
   * tick, up to `maxBatch` groups each. A master's calls of a tick all go one way, in that order:
   * on its connection (cross-slot FCALLs), or all per slot (one pipeline) when each holds a lone
   * request (its lean call) or the master is unknown or not ready. Split between the two, a lone
   * call sent per slot went out after the master's FCALLs made after it: a tick's calls for one key
   * were applied out of order (local-first's push of a stale view's units, then the store's
   * decision: the decision came first and did not see them).
   */
  dispatch(tick: readonly Call[]): void {
    if (!this.usable) return this.host.bySlot(tick);
    const masters = new Map(this.cluster.nodes('master').map((node) => [`${node.options.host}:${node.options.port}`, node]));
    // Each master's part of each call of the tick, in the tick's order.
    const parts = new Map<string, { index: number; batch: Pending[] }[]>();
    tick.forEach(({ batch }, index) => {
      for (const [address, group] of this.byMaster(batch)) {
        let mine = parts.get(address);
        if (mine === undefined) parts.set(address, (mine = []));
        for (let start = 0; start < group.length; start += this.host.maxBatch) mine.push({ index, batch: group.slice(start, start + this.host.maxBatch) });
      }
    });
    // The per-slot parts, by the call of the tick they came from: sent in the tick's order.
    const perSlot: Pending[][] = [];
    for (const [address, mine] of parts) {
      const node = masters.get(address);
      if (node !== undefined && node.status === 'ready' && mine.some(({ batch }) => batch.length > 1)) {
        for (const { index, batch } of mine) void this.call(node, tick[index]!.timeKey, batch);
        continue;
      }
      for (const { index, batch } of mine) (perSlot[index] ??= []).push(...batch);
    }
    const rest = tick.flatMap(({ timeKey }, index) => (perSlot[index] === undefined ? [] : [{ timeKey, batch: perSlot[index] }]));
    if (rest.length > 0) this.host.bySlot(rest);
  }

  /** `queue` by the master serving each group's slot in ioredis's slot table ('' when none is known). */
  private byMaster(queue: Pending[]): Map<string, Pending[]> {
    const groups = new Map<string, Pending[]>();
    for (const pending of queue) {
      const master = this.cluster.slots[calculateSlot(pending.keys[0]!)]?.[0] ?? '';
      const group = groups.get(master);
      if (group === undefined) groups.set(master, [pending]);
      else group.push(pending);
    }
    return groups;
  }

  /** One FCALL deciding `batch` on `node`; the groups it left out go the per-slot path. */
  private async call(node: Redis, timeKey: string, batch: Pending[]): Promise<void> {
    let args: (string | number)[];
    try {
      args = crossSlotArgs(timeKey, batch, this.host.callerClock);
    } catch (error) {
      // A calendar window past the dates JavaScript holds (InvalidTimeError): the batch shares its `now`.
      for (const pending of batch) pending.reject(error);
      return;
    }
    let reply: [number[], number[]];
    this.host.busy(1);
    try {
      reply = (await node.fcall(CROSS_SLOT_LIBRARY.name, 0, ...args)) as [number[], number[]];
    } catch (error) {
      this.host.busy(-1);
      return this.failed(node, timeKey, batch, error);
    }
    this.host.busy(-1);
    const [values, leftOut] = reply;
    if (leftOut.length === 0) return deliver(batch, values, this.host.address);
    const skipped = new Set(leftOut.map((group) => group - 1));
    const decided = batch.filter((_, index) => !skipped.has(index));
    if (decided.length > 0) deliver(decided, values, this.host.address);
    this.host.bySlot([{ timeKey, batch: batch.filter((_, index) => skipped.has(index)) }]);
  }

  /** A whole call's failure: decided again per slot when nothing ran, else reported as the store does. */
  private failed(node: Redis, timeKey: string, batch: Pending[], error: unknown): void {
    const text = String(error);
    if (NOT_LOADED.test(text)) void this.loadOn(node);
    else if (REFUSED.test(text)) this.usable = false;
    else if (!NOTHING_RAN.test(text)) return this.host.fail(timeKey, batch, error);
    this.host.bySlot([{ timeKey, batch }]);
  }

  private async loadOn(node: Redis): Promise<void> {
    // Refused by Redis itself (before 7.0, an ACL, an unknown flag): per slot from now on.
    if (!(await loadLibrary(node, CROSS_SLOT_LIBRARY.source))) this.usable = false;
  }
}

/**
 * The arguments of a cross-slot call for `batch` (a lone group too: the batch script's, never the
 * lean one's): decide.lua's arguments, the keys, the index of decide.lua's group count in its
 * arguments, then the key count.
 */
export function crossSlotArgs(timeKey: string, batch: Pending[], callerClock: boolean): (string | number)[] {
  const [, keys, args] = scriptCall(timeKey, batch, callerClock, false);
  // decide.lua's arguments end with the group count, then per group its size and 3 per request.
  const groupsLength = 1 + batch.reduce((total, pending) => total + 1 + 3 * pending.keys.length, 0);
  return [...args, ...keys, args.length - groupsLength + 1, keys.length];
}
