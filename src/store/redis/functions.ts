/**
 * Lone decisions through Redis Functions: the lean scripts' library (scripts.ts LEAN_LIBRARY) is
 * loaded on every master when the store connects and called with FCALL, so its Lua functions are
 * created once per load rather than on every call (EVALSHA re-runs a script's whole body). Loaded
 * again when a node says it does not have it (FUNCTION FLUSH, a restart without persistence, a
 * master that joined later); given up for EVALSHA of the lean scripts when Redis refuses to load
 * it or lets this user not call it (an ACL without FUNCTION or FCALL, a Redis without Functions).
 */
import { Cluster, type Redis } from 'ioredis';
import type { AlgorithmName } from '../../algorithms/catalog.js';
import { LEAN_LIBRARY } from './lua.js';

/** The reply of a node that lacks the library (or, before Redis 7.0, FCALL itself). */
const NOT_LOADED = /Function not found|unknown command/i;
/** An ACL that does not let this user FCALL. */
const NOT_PERMITTED = /^(ReplyError: )?NOPERM/;

export class LeanFunctions {
  /** False once Redis refused the library: lone decisions then take their lean script (EVALSHA). */
  private usable = true;
  private loading: Promise<void> | undefined;

  constructor(private readonly client: Redis | Cluster) {}

  /** Loads the library on every master (once at a time); never rejects. */
  load(): Promise<void> {
    this.loading ??= this.loadEverywhere().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  /** The function deciding `algorithm`, while Redis holds the library for us (else EVALSHA of the lean script). */
  nameOf(algorithm: AlgorithmName): string | undefined {
    return this.usable ? LEAN_LIBRARY.functions[algorithm] : undefined;
  }

  /**
   * FCALLs `algorithm`'s function; `fallback` (the lean script by EVALSHA) when Redis will not hold
   * the library. A script's own error or a lost connection is the caller's to handle, as for EVALSHA.
   */
  call(algorithm: AlgorithmName, keys: string[], args: (string | number)[], fallback: () => Promise<number[]>): Promise<number[]> {
    const name = LEAN_LIBRARY.functions[algorithm];
    if (!this.usable || name === undefined) return fallback();
    // Not an async function: a lone decision waits on ioredis's promise alone, one promise less.
    const called = this.client.fcall(name, keys.length, ...keys, ...args) as Promise<number[]>;
    return called.catch((error: unknown) => this.callAgain(error, name, keys, args, fallback));
  }

  /** After FCALL failed: EVALSHA if Redis will not let us call the library, once more after loading it if a node lacks it. */
  private async callAgain(error: unknown, name: string, keys: string[], args: (string | number)[], fallback: () => Promise<number[]>): Promise<number[]> {
    if (NOT_PERMITTED.test(String(error))) {
      this.usable = false;
      return fallback();
    }
    if (!NOT_LOADED.test(String(error))) throw error;
    await this.load();
    if (!this.usable) return fallback();
    return (await this.client.fcall(name, keys.length, ...keys, ...args)) as number[];
  }

  private async loadEverywhere(): Promise<void> {
    const nodes = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
    await Promise.all(nodes.map((node) => this.loadOn(node)));
  }

  private async loadOn(node: Redis): Promise<void> {
    // Refused by Redis itself: EVALSHA from now on.
    if (!(await loadLibrary(node, LEAN_LIBRARY.source))) this.usable = false;
  }
}

/**
 * FUNCTION LOAD of a library's `source` on `node`: false when Redis itself refused it (an ACL, a
 * server before 7.0, an unknown flag); true when loaded, already there, or the connection was lost
 * (not a refusal: the next "Function not found" loads it again).
 */
export async function loadLibrary(node: Redis, source: string): Promise<boolean> {
  try {
    await node.function('LOAD', source);
  } catch (error) {
    if (/already exists/.test(String(error))) return true;
    if (error instanceof Error && error.name === 'ReplyError') return false;
  }
  return true;
}
