/**
 * `tollgate gateway` settings: `--config FILE` (the gateway configuration, required), where the
 * proxy and the admin port listen, and the service's own flags (Redis, admin token, failure modes,
 * drain, TLS), read and validated by the service's `resolveServiceOptions` so both commands agree.
 */
import { InvalidOptionError } from '../errors.js';
import { checkWholeNumberText } from '../options.js';
import { PORT_RANGE, SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions } from '../service/index.js';
import { loadGatewayConfig } from './config/read.js';
import { deferNeedsRedis, hasRedis } from './defer/setup.js';
import type { GatewayOptions } from './server.js';

/** The flags only the gateway takes, with their environment variables. */
const OWN_FLAGS: Readonly<Record<string, string>> = {
  config: 'TOLLGATE_GATEWAY_CONFIG',
  rules: 'TOLLGATE_CONFIG',
  port: 'TOLLGATE_GATEWAY_PORT',
  host: 'TOLLGATE_HOST',
  'admin-port': 'TOLLGATE_ADMIN_PORT',
};

/** The service flags the gateway passes on as they are. */
const SHARED_FLAGS = [
  'redis', 'redis-cluster', 'redis-sentinel', 'redis-sentinel-name', 'admin-token', 'admin-token-file', 'admin-bind', 'admin-public', 'metrics-token', 'metrics-token-file', 'log-level', 'merge-domains', 'shadow-mode', 'quota-mode',
  'failure-mode', 'expected-nodes', 'deadline-ms', 'fail-closed-status', 'local-cache-keys', 'drain-delay', 'shutdown-timeout',
  'keep-alive-timeout', 'headers-timeout', 'max-requests-per-socket', 'max-keys',
  // TLS: the proxy listener (mutual with --tls-client-ca) and the admin listener serve the certificate.
  'tls-cert', 'tls-key', 'tls-client-ca', 'tls-client-san',
] as const;

/** Every flag `gateway` takes: name → its environment variable. */
export const GATEWAY_FLAGS: Readonly<Record<string, string>> = {
  ...OWN_FLAGS,
  ...Object.fromEntries(SHARED_FLAGS.map((flag) => [flag, SERVE_FLAGS[flag]!])),
};

/** The gateway flags that are switches. */
export const GATEWAY_SWITCHES: ReadonlySet<string> = new Set([...SWITCH_FLAGS].filter((flag) => flag in GATEWAY_FLAGS));

/** The proxy's port when neither `--port` nor the configuration's `listen` gives one (envoy's examples use it). */
const DEFAULT_PORT = 8888;
/** envoy's admin port: the gateway stands in for Envoy (serve's default is envoyproxy/ratelimit's 6070). */
const DEFAULT_ADMIN_PORT = 9901;

/**
 * Flags over the environment over the configuration file; validates everything, the file included.
 * @throws {GatewayConfigError} the file's problems, {@link InvalidOptionError} a bad flag.
 */
export function resolveGatewayOptions(flags: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv): GatewayOptions {
  const value = (flag: string): string | undefined => {
    const given = flags[flag] ?? env[GATEWAY_FLAGS[flag]!];
    return given === undefined || given === '' ? undefined : given;
  };
  const configPath = value('config');
  if (configPath === undefined) throw new InvalidOptionError('gateway needs --config FILE (or TOLLGATE_GATEWAY_CONFIG): the routes and upstreams (docs/gateway.md)');
  const config = loadGatewayConfig(configPath);
  const where = (flag: string) => `--${flag} (or ${GATEWAY_FLAGS[flag]})`;
  const port = (flag: string, fallback: number): number => checkWholeNumberText(value(flag), { ...PORT_RANGE, name: where(flag), fallback });
  const host = value('host') ?? config.listen?.host ?? '0.0.0.0';
  const rules = value('rules') ?? config.rules;
  // The service reads only what is given here: its own environment variables (TOLLGATE_PORT, ...) are
  // serve's. It runs its admin plane only (no decision or gRPC listener): `port` and `grpc-port` are unused.
  const serviceFlags: Record<string, string | undefined> = { host, port: '0', 'grpc-port': '0', 'admin-port': String(port('admin-port', DEFAULT_ADMIN_PORT)), ...(rules !== undefined ? { config: rules } : {}) };
  const serviceEnv: NodeJS.ProcessEnv = {};
  for (const flag of SHARED_FLAGS) {
    serviceFlags[flag] = flags[flag];
    serviceEnv[SERVE_FLAGS[flag]!] = env[SERVE_FLAGS[flag]!];
  }
  const rulesHint = { missing: `no rules given (no rules: in ${configPath}, no --rules, no TOLLGATE_CONFIG)`, fix: `add rules: FILE|DIR to ${configPath} or give --rules FILE|DIR (docs/gateway.md)` };
  const service = { ...resolveServiceOptions(serviceFlags, serviceEnv), rulesHint };
  const deferring = config.routes.find((route) => route.onLimit === 'defer');
  if (deferring !== undefined && !hasRedis(service)) throw new InvalidOptionError(`${deferring.where}: ${deferNeedsRedis()}`);
  const proxyPort = port('port', config.listen?.port ?? DEFAULT_PORT);
  if (proxyPort !== 0 && proxyPort === service.adminPort) {
    throw new InvalidOptionError(`${where('admin-port')} is ${proxyPort}, the same port as the proxy's (--port or the file's listen): give the admin listener a port of its own (default ${DEFAULT_ADMIN_PORT})`);
  }
  return { configPath, config, host, port: proxyPort, service };
}
