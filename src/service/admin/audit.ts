/**
 * The audit log: one structured line per admin action (rules push, key reset, block, unblock,
 * override put and delete) and
 * per failed admin authentication, saying who (remote address, a fingerprint of the token: never
 * the token), what (action, domains, key) and how it ended (result and status). Failed logins are
 * themselves rate limited per address by a Tollgate limiter on its own memory store, so a flood
 * leaves a few lines and one "suppressed K failed logins from X" summary per second, not a line each.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Logger } from 'pino';
import { createLimiterCore, type LimiterCore } from '../../limiter/index.js';
import { compilePolicy } from '../../policy.js';
import { memoryStore } from '../../store/memory.js';

/** The admin actions the audit log records, `auth.failed` for a refused authentication, `auth.lockout` for an address slowed down (backoff.ts). */
export type AuditAction = 'rules.push' | 'keys.reset' | 'keys.block' | 'keys.unblock' | 'overrides.put' | 'overrides.delete' | 'auth.failed' | 'auth.lockout';

/** How an audited request ended: done, refused for its credentials, or failed (bad input, store). */
export type AuditResult = 'ok' | 'denied' | 'error';

/** What an admin handler learns about its action while running (added to its audit line). */
export interface AuditSubject {
  domains?: readonly string[];
  key?: string;
  /** The ids of the overrides put. */
  overrides?: readonly string[];
}

/** Failed logins logged per address per second; the rest are counted into one summary. */
export const FAILED_LOGIN_LINES_PER_SECOND = 5;

/** Addresses whose suppressed failures are followed at once; beyond, they are summed under `*`. */
const MAX_SUPPRESSED_ADDRESSES = 10_000;

const FAILED_LOGIN_POLICY = compilePolicy({ algorithm: 'fixed-window', limit: FAILED_LOGIN_LINES_PER_SECOND, window: 1_000 });

/** `Authorization: Bearer <token>`: the scheme is case-insensitive (RFC 7235), then one or more spaces. */
const BEARER = /^bearer +(\S.*)$/i;

/** The token an `Authorization` header carries, if it is a Bearer one. */
export function bearerToken(request: IncomingMessage): string | undefined {
  return BEARER.exec(request.headers.authorization ?? '')?.[1];
}

/** A short fingerprint that names a token in logs without revealing it: the first 8 hex of its SHA-256. */
export function tokenId(token: string): string {
  return createHash('sha256').update(token).digest('hex').slice(0, 8);
}

/** Who sent `request`: its peer address (the service trusts no proxy header). */
export function remoteAddress(request: IncomingMessage): string {
  return request.socket.remoteAddress ?? 'unknown';
}

export class AuditLog {
  private readonly logger: Logger;
  private readonly limiter: LimiterCore;
  /** Failed logins not logged, per address, until their window ends and the summary is written. */
  private readonly suppressed = new Map<string, { count: number; timer: NodeJS.Timeout }>();

  constructor(logger: Logger, clock: () => number) {
    this.logger = logger.child({ component: 'audit', audit: true });
    // Its own memory store: a flood of failed logins never touches the decisions' store.
    this.limiter = createLimiterCore({ store: memoryStore({ maxKeys: MAX_SUPPRESSED_ADDRESSES, sweepIntervalMs: 0 }), clock });
  }

  /** One line for an admin action that passed authentication. */
  action(request: IncomingMessage, action: AuditAction, subject: AuditSubject, status: number): void {
    const token = bearerToken(request);
    const result: AuditResult = status < 400 ? 'ok' : 'error';
    const line = { action, remoteAddress: remoteAddress(request), ...(token !== undefined ? { tokenId: tokenId(token) } : {}), ...subject, result, status };
    if (result === 'ok') this.logger.info(line, `audit: ${action} ok`);
    else this.logger.warn(line, `audit: ${action} failed (${status})`);
  }

  /** One line for a refused admin authentication, unless this address is over its lines for the second. */
  failedLogin(request: IncomingMessage, status: number, reason: string): void {
    const address = remoteAddress(request);
    const decision = this.limiter.limitSync(`failed-login:${address}`, FAILED_LOGIN_POLICY);
    if (!decision.allowed) return this.suppress(address, decision.retryAfter);
    const token = bearerToken(request);
    const target = `${request.method ?? 'GET'} ${(request.url ?? '/').split('?')[0]}`;
    const line = { action: 'auth.failed', remoteAddress: address, ...(token !== undefined ? { tokenId: tokenId(token) } : {}), target, reason, result: 'denied', status };
    this.logger.warn(line, `audit: failed admin authentication from ${address}`);
  }

  /** One line for an address locked out after `failures` wrong tokens: at most one per lockout, so not rate limited. */
  lockout(request: IncomingMessage, failures: number, lockoutMs: number): void {
    const address = remoteAddress(request);
    const line = { action: 'auth.lockout', remoteAddress: address, failures, lockoutMs, result: 'denied', status: 429 };
    this.logger.warn(line, `audit: ${address} locked out for ${lockoutMs} ms after ${failures} wrong tokens`);
  }

  /** Counts a failed login not logged; its summary is written when the address's window ends. */
  private suppress(address: string, retryAfterMs: number): void {
    const bucket = this.suppressed.has(address) || this.suppressed.size < MAX_SUPPRESSED_ADDRESSES ? address : '*';
    const entry = this.suppressed.get(bucket);
    if (entry !== undefined) {
      entry.count += 1;
      return;
    }
    const timer = setTimeout(() => this.summarise(bucket), Math.max(1, retryAfterMs));
    timer.unref();
    this.suppressed.set(bucket, { count: 1, timer });
  }

  private summarise(address: string): void {
    const entry = this.suppressed.get(address);
    if (entry === undefined) return;
    this.suppressed.delete(address);
    clearTimeout(entry.timer);
    const line = { action: 'auth.failed', remoteAddress: address, result: 'denied', suppressed: entry.count };
    this.logger.warn(line, `suppressed ${entry.count} failed logins from ${address === '*' ? 'other addresses' : address}`);
  }

  /** Writes the pending summaries and closes the limiter. */
  async close(): Promise<void> {
    for (const address of [...this.suppressed.keys()]) this.summarise(address);
    await this.limiter.close();
  }
}
