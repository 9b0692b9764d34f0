/**
 * Starts the real `tollgate serve` CLI as a child process on free ports and reads its listening
 * ports from its JSON log lines.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, expect } from 'vitest';

const CLI = new URL('../../dist/cli/main.js', import.meta.url).pathname;

export interface ServiceProcess {
  readonly httpPort: number;
  /** The admin listener's port (dashboard, metrics, events, rules, admin API). */
  readonly adminPort: number;
  readonly grpcPort: number | undefined;
  readonly child: ChildProcessWithoutNullStreams;
  readonly logs: Record<string, unknown>[];
  /** A URL on the decision listener. */
  url(path: string): string;
  /** A URL on the admin listener. */
  admin(path: string): string;
  /** SIGTERM, then resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * How long a `tollgate` process may take to listen: generous, as a start on a 2-core machine busy
 * with other work (and the suite's own files) takes seconds; under the suite's 30 s test timeout.
 */
export const PROCESS_START_MS = 25_000;

/**
 * Starts `tollgate serve --port 0 --grpc-port 0 --admin-port 0 ...args`. Without a drain delay in
 * `args` or `env`, `--drain-delay 0` is added so SIGTERM stops at once (the default 5 s would slow
 * every suite); without an admin port, a free one is taken (the default 6070 would be shared).
 */
export async function startServiceProcess(args: string[], env: Record<string, string> = {}): Promise<ServiceProcess> {
  const drain = args.includes('--drain-delay') || env.TOLLGATE_DRAIN_DELAY !== undefined ? [] : ['--drain-delay', '0'];
  const admin = args.includes('--admin-port') || env.TOLLGATE_ADMIN_PORT !== undefined ? [] : ['--admin-port', '0'];
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', ...admin, ...drain, ...args], {
    env: { ...process.env, ...env },
  });
  const logs: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    try {
      logs.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      logs.push({ msg: line });
    }
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + PROCESS_START_MS;
  while (!logs.some((line) => String(line.msg).startsWith('HTTP listening'))) {
    if (child.exitCode !== null) throw new Error(`tollgate serve exited (${child.exitCode}) before listening: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`tollgate serve did not listen within ${PROCESS_START_MS} ms: ${stderr}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  // gRPC starts right after HTTP; give it a moment to log.
  const grpcDeadline = Date.now() + 2_000;
  while (!logs.some((line) => String(line.msg).startsWith('gRPC listening')) && Date.now() < grpcDeadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const httpPort = Number(logs.find((line) => String(line.msg).startsWith('HTTP listening'))!.port);
  const adminPort = Number(logs.find((line) => String(line.msg).startsWith('Admin listening'))!.port);
  const grpcLine = logs.find((line) => String(line.msg).startsWith('gRPC listening'));
  return {
    httpPort,
    adminPort,
    grpcPort: grpcLine === undefined ? undefined : Number(grpcLine.port),
    child,
    logs,
    url: (path) => `http://127.0.0.1:${httpPort}${path}`,
    admin: (path) => `http://127.0.0.1:${adminPort}${path}`,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/**
 * Starts `tollgate serve ...args` before the suite's tests and stops it after them (expecting exit
 * code 0). Call inside a `describe`; the returned function gives the running service.
 */
export function serviceForSuite(args: string[], env: Record<string, string> = {}): () => ServiceProcess {
  let service: ServiceProcess | undefined;
  beforeAll(async () => {
    service = await startServiceProcess(args, env);
  }, PROCESS_START_MS + 5_000);
  afterAll(async () => {
    expect(await service?.stop()).toBe(0);
  });
  return () => service!;
}
