/**
 * `tollgate serve` settings: command-line flags, then `TOLLGATE_*` environment variables, then an
 * optional settings file, then defaults (flags win). Every value is validated; a bad one is an error naming the flag and the
 * variable, never a silent default.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { InvalidOptionError } from '../errors.js';

export interface ServiceOptions {
  /** Rules file or directory (`--config`, `TOLLGATE_CONFIG`). */
  readonly config?: string;
  /** Redis URL (`--redis`, `TOLLGATE_REDIS`); neither this nor `redisCluster`: memory store. */
  readonly redis?: string;
  /** Redis Cluster seed nodes (`--redis-cluster host:port,...`, `TOLLGATE_REDIS_CLUSTER`). */
  readonly redisCluster?: readonly { host: string; port: number }[];
  /** HTTP port (`--port`, `TOLLGATE_PORT`), default 8080; 0 picks a free port. */
  readonly port: number;
  /** gRPC port (`--grpc-port`, `TOLLGATE_GRPC_PORT`), default 8081; 0 picks a free port. */
  readonly grpcPort: number;
  /** Address to listen on (`--host`, `TOLLGATE_HOST`), default 0.0.0.0. */
  readonly host: string;
  /** Bearer token for the admin endpoints (`--admin-token`, `TOLLGATE_ADMIN_TOKEN`); unset: admin disabled. */
  readonly adminToken?: string;
  /** pino level (`--log-level`, `TOLLGATE_LOG_LEVEL`), default info. */
  readonly logLevel: string;
  /** Processes serving the same ports (`--workers`, `TOLLGATE_WORKERS`), default 1; > 1 needs Redis. */
  readonly workers: number;
}

/** The flags `serve` takes: name → environment variable. */
export const SERVE_FLAGS: Readonly<Record<string, string>> = {
  config: 'TOLLGATE_CONFIG',
  redis: 'TOLLGATE_REDIS',
  'redis-cluster': 'TOLLGATE_REDIS_CLUSTER',
  port: 'TOLLGATE_PORT',
  'grpc-port': 'TOLLGATE_GRPC_PORT',
  host: 'TOLLGATE_HOST',
  'admin-token': 'TOLLGATE_ADMIN_TOKEN',
  'log-level': 'TOLLGATE_LOG_LEVEL',
  workers: 'TOLLGATE_WORKERS',
  settings: 'TOLLGATE_SETTINGS',
};

const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/**
 * Reads a settings file (`--settings FILE`, `TOLLGATE_SETTINGS`): YAML or JSON mapping flag names
 * (`port`, `redis`, `admin-token`, ...) to values. Unknown names are errors.
 */
export function readSettingsFile(path: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = parseYaml(readFileSync(path, 'utf8'), { maxAliasCount: 0 });
  } catch (error) {
    throw new InvalidOptionError(`settings file ${path} cannot be read: ${(error as Error).message}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidOptionError(`settings file ${path} must be a mapping of flag names to values`);
  const settings: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed)) {
    if (!(name in SERVE_FLAGS) || name === 'settings') {
      throw new InvalidOptionError(`settings file ${path}: unknown setting ${JSON.stringify(name)}; the settings are ${Object.keys(SERVE_FLAGS).filter((flag) => flag !== 'settings').join(', ')}`);
    }
    if (typeof value !== 'string' && typeof value !== 'number') throw new InvalidOptionError(`settings file ${path}: ${name} must be a string or a number`);
    settings[name] = String(value);
  }
  return settings;
}

/** Merges flags over the environment over the settings file, and validates the result. */
export function resolveServiceOptions(flags: Readonly<Record<string, string | undefined>>, env: NodeJS.ProcessEnv): ServiceOptions {
  const settingsPath = flags.settings ?? env.TOLLGATE_SETTINGS;
  const file = settingsPath === undefined || settingsPath === '' ? {} : readSettingsFile(settingsPath);
  const value = (flag: string): string | undefined => {
    const given = flags[flag] ?? env[SERVE_FLAGS[flag]!] ?? file[flag];
    return given === undefined || given === '' ? undefined : given;
  };
  const where = (flag: string) => `--${flag} (or ${SERVE_FLAGS[flag]})`;
  const port = (flag: string, fallback: number): number => {
    const text = value(flag);
    if (text === undefined) return fallback;
    const number = Number(text);
    if (!/^\d+$/.test(text) || number > 65_535) throw new InvalidOptionError(`${where(flag)} must be a port from 0 to 65535, got ${JSON.stringify(text)}`);
    return number;
  };
  const redis = value('redis');
  const clusterText = value('redis-cluster');
  if (redis !== undefined && clusterText !== undefined) {
    throw new InvalidOptionError(`give ${where('redis')} or ${where('redis-cluster')}, not both`);
  }
  if (redis !== undefined && !/^rediss?:\/\//.test(redis)) {
    throw new InvalidOptionError(`${where('redis')} must look like redis://host:6379, got ${JSON.stringify(redis)}`);
  }
  const redisCluster = clusterText?.split(',').map((node) => {
    const match = /^\s*([^\s:]+):(\d{1,5})\s*$/.exec(node);
    if (match === null || Number(match[2]) > 65_535) {
      throw new InvalidOptionError(`${where('redis-cluster')} must be host:port,host:port,..., got ${JSON.stringify(node)}`);
    }
    return { host: match[1]!, port: Number(match[2]) };
  });
  const logLevel = value('log-level') ?? 'info';
  if (!LOG_LEVELS.has(logLevel)) throw new InvalidOptionError(`${where('log-level')} must be one of ${[...LOG_LEVELS].join(', ')}, got ${JSON.stringify(logLevel)}`);
  const adminToken = value('admin-token');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new InvalidOptionError(`${where('admin-token')} must be at least 16 characters (it guards rule changes and key resets)`);
  }
  const config = value('config');
  const workersText = value('workers') ?? '1';
  const workers = Number(workersText);
  if (!/^\d+$/.test(workersText) || workers < 1 || workers > 64) {
    throw new InvalidOptionError(`${where('workers')} must be a whole number from 1 to 64, got ${JSON.stringify(workersText)}`);
  }
  if (workers > 1 && redis === undefined && redisCluster === undefined) {
    throw new InvalidOptionError(`${where('workers')} above 1 needs --redis or --redis-cluster: each worker's memory store would count on its own`);
  }
  return {
    workers,
    ...(config !== undefined ? { config } : {}),
    ...(redis !== undefined ? { redis } : {}),
    ...(redisCluster !== undefined ? { redisCluster } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    port: port('port', 8080),
    grpcPort: port('grpc-port', 8081),
    host: value('host') ?? '0.0.0.0',
    logLevel,
  };
}
