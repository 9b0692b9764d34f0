/**
 * An in-process `startService` for a file's tests, apart from service.ts (child processes) so the
 * files that only spawn `tollgate serve` do not load the service's code.
 */
import { afterAll, beforeAll } from 'vitest';
import { resolveServiceOptions } from '../../src/service/options.js';
import { startService, type RunningService } from '../../src/service/server.js';

/** What a CLI run printed and its exit code. */
export interface CommandRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * An in-process service for a file's tests (the admin commands' and the guides' tests): started
 * before them on free loopback ports without gRPC, silent, with `flags` (config, admin token, ...),
 * closed after them. Read `service` and `adminUrl` inside the tests.
 */
export function inProcessServiceForSuite(flags: Record<string, string>): { readonly service: RunningService; readonly adminUrl: string } {
  let service: RunningService | undefined;
  beforeAll(async () => {
    service = await startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', 'log-level': 'silent', host: '127.0.0.1', 'drain-delay': '0', ...flags }, {}), undefined, { grpc: false });
  }, 60_000);
  afterAll(async () => service?.close());
  return {
    get service() {
      return service!;
    },
    get adminUrl() {
      return `http://127.0.0.1:${service!.adminPort}`;
    },
  };
}
