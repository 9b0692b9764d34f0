/**
 * `tollgate gateway` for tests: upstream servers (node:http on free ports) that record what they
 * receive, and the gateway itself started in this process from a configuration and rules written to
 * a temporary folder, listening on free ports, its decisions on a clock the test holds.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { resolveGatewayOptions } from '../../src/gateway/options.js';
import { startGateway, type RunningGateway } from '../../src/gateway/server.js';

/** An upstream the test runs; `requests` holds what reached it. */
export interface Upstream {
  readonly port: number;
  readonly url: string;
  readonly requests: { method: string; url: string; headers: IncomingMessage['headers'] }[];
  close(): Promise<void>;
}

/** Starts an upstream; `handler` answers (default: 200 with `upstream <method> <url>`). */
export async function startUpstream(handler?: (req: IncomingMessage, res: ServerResponse) => void): Promise<Upstream> {
  const requests: Upstream['requests'] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    if (handler !== undefined) return handler(req, res);
    req.resume();
    res.end(`upstream ${req.method} ${req.url}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A running gateway and the folder its files are in. */
export interface TestGateway {
  readonly gateway: RunningGateway;
  readonly dir: string;
  url(path: string): string;
  admin(path: string): string;
  close(): Promise<void>;
}

/** The clock a test moves: decisions read it instead of the store's time. */
export class TestClock {
  constructor(public now = Date.UTC(2030, 0, 1)) {}
  readonly read = (): number => this.now;
}

/**
 * Writes `config` (gateway YAML) and `rules` (rules YAML, referenced as `rules: ./rules.yaml` when
 * the config does not say) and starts the gateway on free ports.
 */
export async function startTestGateway(config: string, rules: string | undefined, options: { flags?: Record<string, string>; clock?: TestClock; logger?: Logger } = {}): Promise<TestGateway> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-gateway-'));
  if (rules !== undefined) writeFileSync(join(dir, 'rules.yaml'), rules);
  const withRules = rules !== undefined && !/^rules:/m.test(config) ? `rules: ./rules.yaml\n${config}` : config;
  writeFileSync(join(dir, 'gateway.yaml'), withRules);
  const flags = { config: join(dir, 'gateway.yaml'), port: '0', 'admin-port': '0', host: '127.0.0.1', 'drain-delay': '0', 'log-level': 'silent', ...options.flags };
  const gateway = await startGateway(resolveGatewayOptions(flags, {}), options.logger ?? pino({ level: 'silent' }), options.clock === undefined ? {} : { clock: options.clock.read });
  return {
    gateway,
    dir,
    url: (path) => `http://127.0.0.1:${gateway.port}${path}`,
    admin: (path) => `http://127.0.0.1:${gateway.adminPort}${path}`,
    close: async () => {
      await gateway.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A response as a test reads it. */
export interface Answer {
  readonly status: number;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
}

/**
 * One request over a fresh connection (node:http, so hop-by-hop headers go out as written). `path`
 * is sent exactly as written (the URL's own path is normalised by the URL parser: `/./a` → `/a`).
 */
export function send(url: string, options: { method?: string; headers?: Record<string, string | string[]>; body?: string | Buffer; path?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false, ...(options.path !== undefined ? { path: options.path } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}
