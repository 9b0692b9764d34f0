/**
 * Readiness (`/readyz`, gRPC health): a list of named checks, each saying whether the service may
 * take traffic and what to show. The service is ready when every check passes; another condition
 * is one more entry in the list built by `server.ts`. Checks read live state (no probe, no I/O), so
 * asking is cheap and answers change the moment the state does; `ServiceEvents.readiness` says when.
 */
import type { RulesHolder } from '../../rules/ruleset.js';
import type { RulesWatcher } from '../../rules/watch.js';

/** One condition of readiness. */
export interface ReadinessCheck {
  readonly name: string;
  /** Live state: `ready: false` makes the service not ready; `details` are merged into `/readyz`. */
  check(): { readonly ready: boolean; readonly details?: Record<string, unknown> };
}

/** What `/readyz` answers: `draining` once a shutdown began, else `not_ready` while any check fails. */
export type ReadinessStatus = 'ready' | 'not_ready' | 'draining';

export interface ReadinessReport {
  readonly ready: boolean;
  readonly status: ReadinessStatus;
  /** The names of the checks that fail (empty when ready). */
  readonly notReady: readonly string[];
  readonly details: Record<string, unknown>;
}

/** The name of the check {@link DrainState.check} adds. */
export const DRAINING = 'draining';

/** Runs every check. */
export function evaluateReadiness(checks: readonly ReadinessCheck[]): ReadinessReport {
  const details: Record<string, unknown> = {};
  const notReady: string[] = [];
  for (const check of checks) {
    const result = check.check();
    Object.assign(details, result.details);
    if (!result.ready) notReady.push(check.name);
  }
  const status: ReadinessStatus = notReady.includes(DRAINING) ? 'draining' : notReady.length > 0 ? 'not_ready' : 'ready';
  return { ready: notReady.length === 0, status, notReady, details };
}

/** `/readyz`'s `rules` field when no rules are loaded. */
const NO_RULES = 'none loaded: nothing is limited';

/** The rules in force (always ready: answering OK to every check is what this service was asked to do). */
export function rulesCheck(holder: RulesHolder, watcher: RulesWatcher | undefined): ReadinessCheck {
  return {
    name: 'rules',
    check: () => {
      const details: Record<string, unknown> = { rulesVersion: holder.current.version, domains: holder.current.domainNames() };
      if (holder.current.domainNames().length === 0) details.rules = NO_RULES;
      const lastError = watcher?.status().lastError;
      if (lastError !== undefined) details.rulesError = lastError;
      return { ready: true, details };
    },
  };
}

/**
 * SIGTERM / SIGINT: not ready at once (so load balancers stop sending), while requests are still
 * served for the drain delay; a second signal cuts the delay short.
 */
export class DrainState {
  private since: number | undefined;
  private skip: (() => void) | undefined;

  get draining(): boolean {
    return this.since !== undefined;
  }

  /** When draining began (epoch ms). */
  get drainingSince(): number | undefined {
    return this.since;
  }

  /** Starts draining (once) and resolves after `delayMs`, or at once if already draining or skipped. */
  begin(delayMs: number): Promise<void> {
    if (this.since !== undefined) {
      this.skipDelay();
      return Promise.resolve();
    }
    this.since = Date.now();
    if (delayMs === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delayMs);
      this.skip = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Ends the drain delay now (a second signal). */
  skipDelay(): void {
    this.skip?.();
    this.skip = undefined;
  }

  check(): ReadinessCheck {
    return {
      name: DRAINING,
      check: () => (this.since === undefined ? { ready: true } : { ready: false, details: { drainingForMs: Date.now() - this.since } }),
    };
  }
}
