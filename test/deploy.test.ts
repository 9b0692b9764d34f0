/**
 * The deployment files (deploy/, examples/envoy/) against the service they deploy: every flag and
 * TOLLGATE_* variable they give `tollgate serve` exists and resolves, every manifest parses, the
 * compose file's paths exist, Envoy asks Tollgate's gRPC port, the health checks and probes ask
 * endpoints a running service answers, and every stop timeout outlasts the drain.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions, type ServiceOptions } from '../src/service/options.js';
import { startServiceProcess, type ServiceProcess } from './support/service.js';

const root = new URL('..', import.meta.url).pathname;
const deployDir = join(root, 'deploy');
const CLI = join(root, 'dist/cli/main.js');
const text = (path: string) => readFileSync(join(root, path), 'utf8');

type Tree = Record<string, unknown>;
const at = (value: unknown, ...path: (string | number)[]): unknown => path.reduce<unknown>((node, step) => (node as Tree | undefined)?.[step], value);

/** Every YAML file under deploy/ and examples/envoy/, relative to the repository. */
function yamlFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? walk(join(dir, entry.name)) : /\.ya?ml$/.test(entry.name) ? [join(dir, entry.name)] : [],
    );
  return [...walk('deploy'), ...walk('examples/envoy')];
}

/** The deploy files that may name TOLLGATE_* variables. */
const DEPLOY_TEXT_FILES = ['deploy/Dockerfile', 'deploy/tollgate.service', 'deploy/tollgate.env', ...yamlFiles()];

// --- Each way of running tollgate, read from its file: the serve arguments and the environment. ---

interface Launch {
  readonly where: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/** Dockerfile instructions with continuation lines joined. */
function dockerInstructions(): { keyword: string; rest: string }[] {
  return text('deploy/Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .filter((line) => /^[A-Z]+\s/.test(line))
    .map((line) => ({ keyword: line.split(/\s/)[0]!, rest: line.slice(line.indexOf(' ') + 1).trim() }));
}

function dockerJson(keyword: string): string[] {
  const found = dockerInstructions().filter((instruction) => instruction.keyword === keyword);
  expect(found, keyword).toHaveLength(1);
  const rest = found[0]!.rest.replace(/^(--\S+\s+)*(CMD\s+)?/, '');
  return JSON.parse(rest) as string[];
}

function dockerLaunch(): Launch {
  const env: Record<string, string> = {};
  for (const { keyword, rest } of dockerInstructions()) {
    if (keyword !== 'ENV') continue;
    for (const [, name, value] of rest.matchAll(/(\w+)=(\S+)/g)) env[name!] = value!;
  }
  return { where: 'Dockerfile', args: dockerJson('CMD'), env };
}

function composeLaunch(): Launch {
  const service = at(parseYaml(text('deploy/docker-compose.yml')), 'services', 'tollgate') as Tree;
  return { where: 'docker-compose.yml', args: service.command as string[], env: service.environment as Record<string, string> };
}

function systemdSettings(): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const line of text('deploy/tollgate.service').split('\n')) {
    const match = /^(\w+)=(.*)$/.exec(line);
    if (match) settings[match[1]!] = match[2]!;
  }
  return settings;
}

function systemdLaunch(): Launch {
  const words = systemdSettings().ExecStart!.split(/\s+/);
  const env = Object.fromEntries(
    text('deploy/tollgate.env')
      .split('\n')
      .filter((line) => /^\w+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
  return { where: 'tollgate.service', args: words.slice(words.findIndex((word) => word.endsWith('/dist/cli/main.js')) + 1), env };
}

function k8sDocuments(): Tree[] {
  return readdirSync(join(deployDir, 'k8s'))
    .filter((name) => name !== 'kustomization.yaml')
    .flatMap((name) => parseAllDocuments(readFileSync(join(deployDir, 'k8s', name), 'utf8')).map((doc) => doc.toJS() as Tree));
}

const k8s = (kind: string): Tree => k8sDocuments().find((doc) => doc.kind === kind)!;
const k8sContainer = (): Tree => (at(k8s('Deployment'), 'spec', 'template', 'spec', 'containers') as Tree[]).find((c) => c.name === 'tollgate')!;

/** What a token taken from a required key of the Secret stands for here: a token of 32 characters. */
const SECRET_TOKEN = 'a-token-from-the-secret-01234567';

function k8sLaunch(): Launch {
  const container = k8sContainer();
  const env: Record<string, string> = {};
  for (const variable of container.env as { name: string; value?: string; valueFrom?: { secretKeyRef?: { optional?: boolean } } }[]) {
    if (variable.value !== undefined) env[variable.name] = variable.value;
    else if (variable.name.endsWith('_TOKEN') && variable.valueFrom?.secretKeyRef !== undefined && variable.valueFrom.secretKeyRef.optional !== true) env[variable.name] = SECRET_TOKEN;
  }
  return { where: 'k8s/deployment.yaml', args: container.args as string[], env };
}

const LAUNCHES = [dockerLaunch, composeLaunch, systemdLaunch, k8sLaunch];

/** The settings a launch resolves to, by the service's own parser and validation. */
function resolveLaunch(launch: Launch): ServiceOptions {
  expect(launch.args[0], launch.where).toBe('serve');
  const options = Object.fromEntries(Object.keys(SERVE_FLAGS).map((flag) => [flag, { type: SWITCH_FLAGS.has(flag) ? ('boolean' as const) : ('string' as const) }]));
  const { values } = parseArgs({ args: launch.args.slice(1) as string[], options, allowPositionals: false, strict: true });
  const flags = Object.fromEntries(Object.entries(values).map(([flag, value]) => [flag, String(value)]));
  return resolveServiceOptions(flags, launch.env);
}

/** Milliseconds a drain may take at most: the drain delay, then the shutdown timeout. */
const drainBudgetMs = (options: ServiceOptions) => options.drainDelayMs + options.shutdownTimeoutMs;

describe('deploy files: flags and environment variables', () => {
  const help = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8', timeout: 10_000 }).stdout;

  it.each(LAUNCHES.map((launch) => [launch().where, launch] as const))('%s: every serve flag exists, is in serve --help, and resolves', (_name, launch) => {
    const { args, where } = launch();
    const flags = args.filter((arg) => arg.startsWith('--'));
    expect(flags.length, where).toBeGreaterThan(0);
    for (const flag of flags) {
      expect(Object.keys(SERVE_FLAGS), `${where}: ${flag}`).toContain(flag.slice(2));
      expect(help, `${where}: ${flag} in serve --help`).toContain(`${flag} `);
    }
    expect(() => resolveLaunch(launch())).not.toThrow();
  });

  it('every TOLLGATE_* variable named in deploy/ and examples/envoy/ is one serve reads', () => {
    const known = new Set(Object.values(SERVE_FLAGS));
    const named = DEPLOY_TEXT_FILES.flatMap((file) => [...text(file).matchAll(/TOLLGATE_[A-Z0-9_]+/g)].map((match) => `${file}: ${match[0]}`));
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((entry) => !known.has(entry.split(': ')[1]!))).toEqual([]);
  });

  it('a misspelt variable or flag would be caught (the checks above can fail)', () => {
    expect(Object.values(SERVE_FLAGS)).not.toContain('TOLLGATE_DRAIN_DELAY_MS');
    expect(() => resolveLaunch({ where: 'probe', args: ['serve', '--drain-delay-ms', '5'], env: {} })).toThrow(/drain-delay-ms/);
    expect(() => resolveLaunch({ where: 'probe', args: ['serve'], env: { TOLLGATE_DRAIN_DELAY: 'soon' } })).toThrow(/drain-delay/);
  });
});

describe('deploy files: manifests', () => {
  it.each(yamlFiles())('%s parses (every document)', (file) => {
    const documents = parseAllDocuments(text(file));
    expect(documents.length).toBeGreaterThan(0);
    for (const document of documents) expect(document.errors.map((error) => error.message)).toEqual([]);
  });

  it('every Kubernetes manifest has apiVersion, kind and a name; kustomization lists them all', () => {
    const docs = k8sDocuments();
    expect(docs.map((doc) => doc.kind).sort()).toEqual(['ConfigMap', 'Deployment', 'Service']);
    for (const doc of docs) expect([typeof doc.apiVersion, typeof at(doc, 'metadata', 'name')]).toEqual(['string', 'string']);
    const listed = (parseYaml(text('deploy/k8s/kustomization.yaml')) as { resources: string[] }).resources;
    expect(listed.sort()).toEqual(readdirSync(join(deployDir, 'k8s')).filter((name) => name !== 'kustomization.yaml').sort());
  });

  it('the compose file builds from files that exist and mounts paths that exist', () => {
    const services = at(parseYaml(text('deploy/docker-compose.yml')), 'services') as Record<string, Tree>;
    const build = services.tollgate!.build as { context: string; dockerfile: string };
    expect(existsSync(join(resolve(deployDir, build.context), build.dockerfile))).toBe(true);
    const mounts = Object.values(services).flatMap((service) => (service.volumes as string[] | undefined) ?? []);
    expect(mounts.length).toBeGreaterThanOrEqual(2);
    for (const mount of mounts) expect(existsSync(resolve(deployDir, mount.split(':')[0]!)), mount).toBe(true);
    const envoyMount = (services.envoy!.volumes as string[]).map((mount) => mount.split(':'));
    const config = envoyMount.find(([, target]) => target === (services.envoy!.command as string[]).at(-1));
    expect(resolve(deployDir, config![0]!)).toBe(join(root, 'examples/envoy/envoy.yaml'));
  });

  it('the Kubernetes ConfigMap holds rules that `tollgate validate` accepts', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-configmap-'));
    try {
      for (const [name, body] of Object.entries(at(k8s('ConfigMap'), 'data') as Record<string, string>)) writeFileSync(join(dir, name), body);
      const result = spawnSync(process.execPath, [CLI, 'validate', dir], { encoding: 'utf8', timeout: 10_000 });
      expect(result.stdout + result.stderr).toMatch(/^OK: 2 domains/);
      expect(result.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('deploy/Dockerfile', () => {
  const ignored = text('.dockerignore')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'));
  const isIgnored = (path: string) =>
    ignored.some((pattern) => (pattern.startsWith('*') ? path.endsWith(pattern.slice(1)) : path === pattern || path.startsWith(`${pattern}/`)));

  it('copies only files that exist and that .dockerignore lets into the build context', () => {
    const sources = dockerInstructions()
      .filter(({ keyword, rest }) => keyword === 'COPY' && !rest.startsWith('--from'))
      .flatMap(({ rest }) => rest.split(/\s+/).slice(0, -1));
    expect(sources).toEqual(expect.arrayContaining(['package-lock.json', 'src', 'LICENSE']));
    for (const source of sources) {
      expect(existsSync(join(root, source)), source).toBe(true);
      expect(isIgnored(source), `${source} is in .dockerignore`).toBe(false);
    }
    expect(isIgnored('node_modules') && isIgnored('dist') && isIgnored('test')).toBe(true);
  });

  it('builds in one stage and runs production dependencies as a non-root user in another, on Node 20', () => {
    const instructions = dockerInstructions();
    const stages = instructions.filter((instruction) => instruction.keyword === 'FROM').map((instruction) => instruction.rest);
    expect(stages).toEqual(['node:20-bookworm-slim AS build', 'node:20-bookworm-slim AS runtime']);
    const runtime = instructions.slice(instructions.findLastIndex((instruction) => instruction.keyword === 'FROM'));
    expect(runtime.filter((i) => i.keyword === 'RUN').map((i) => i.rest).join(' ')).toMatch(/npm ci --omit=dev --ignore-scripts/);
    expect(runtime.find((i) => i.keyword === 'USER')?.rest).toBe('node');
  });
});

describe('examples/envoy/envoy.yaml, wired to the compose file', () => {
  const envoy = parseYaml(text('examples/envoy/envoy.yaml')) as Tree;
  const compose = parseYaml(text('deploy/docker-compose.yml')) as { services: Record<string, Tree> };
  const manager = at(envoy, 'static_resources', 'listeners', 0, 'filter_chains', 0, 'filters', 0, 'typed_config') as Tree;
  const rateLimit = (manager.http_filters as Tree[]).find((filter) => filter.name === 'envoy.filters.http.ratelimit')!.typed_config as Tree;
  const cluster = (name: string) => (at(envoy, 'static_resources', 'clusters') as Tree[]).find((c) => c.name === name)!;
  const endpoint = (name: string) => at(cluster(name), 'load_assignment', 'endpoints', 0, 'lb_endpoints', 0, 'endpoint', 'address', 'socket_address') as Tree;

  it("the rate-limit service is tollgate's gRPC port, over HTTP/2, on the V3 protocol", () => {
    const service = at(rateLimit, 'rate_limit_service') as Tree;
    expect(service.transport_api_version).toBe('V3');
    const clusterName = at(service, 'grpc_service', 'envoy_grpc', 'cluster_name') as string;
    const address = endpoint(clusterName);
    expect(address.address).toBe('tollgate');
    expect(address.port_value).toBe(resolveLaunch(composeLaunch()).grpcPort);
    expect(compose.services.tollgate!.ports).toContain(`${address.port_value}:${address.port_value}`);
    const http2 = at(cluster(clusterName), 'typed_extension_protocol_options', 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions', 'explicit_http_config', 'http2_protocol_options');
    expect(http2).toEqual({});
  });

  it('the filter asks a domain the mounted rules define, with a route that sends descriptors', () => {
    const rulesMount = (compose.services.tollgate!.volumes as string[])[0]!.split(':')[0]!;
    const rulesDir = resolve(deployDir, rulesMount);
    const rules = readdirSync(rulesDir).map((name) => readFileSync(join(rulesDir, name), 'utf8'));
    const forDomain = rules.find((body) => (parseYaml(body) as { domain: string }).domain === rateLimit.domain);
    expect(forDomain, String(rateLimit.domain)).toBeDefined();
    const route = at(manager, 'route_config', 'virtual_hosts', 0, 'routes', 0, 'route') as Tree;
    expect(at(route, 'rate_limits', 0, 'actions', 0)).toEqual({ remote_address: {} });
    // That action sends [remote_address=<client IP>]: the domain's rules must key on it.
    expect(forDomain).toMatch(/key: remote_address\n/);
    expect(Object.keys(compose.services)).toContain(endpoint(route.cluster as string).address);
  });
});

describe('health checks and probes ask endpoints the running service answers', () => {
  const rulesDir = mkdtempSync(join(tmpdir(), 'tollgate-deploy-'));
  let service: ServiceProcess;
  beforeAll(async () => {
    for (const [name, body] of Object.entries(at(k8s('ConfigMap'), 'data') as Record<string, string>)) writeFileSync(join(rulesDir, name), body);
    const { env } = k8sLaunch(); // the Deployment's own settings, with its ConfigMap's rules
    service = await startServiceProcess(['--config', rulesDir, '--log-level', 'info'], { ...env, TOLLGATE_DRAIN_DELAY: '0', TOLLGATE_ADMIN_PORT: '0' });
  }, 20_000);
  afterAll(async () => {
    await service?.stop();
    rmSync(rulesDir, { recursive: true, force: true });
  });

  it("the Dockerfile's HEALTHCHECK command, run as written, passes against the service", () => {
    const healthcheck = dockerJson('HEALTHCHECK');
    expect(healthcheck.join(' ')).toMatch(/\/healthz/);
    const ok = spawnSync(healthcheck[0] === 'node' ? process.execPath : healthcheck[0]!, healthcheck.slice(1), { env: { ...process.env, TOLLGATE_PORT: String(service.httpPort) }, timeout: 10_000 });
    expect(ok.status).toBe(0);
    const refused = spawnSync(process.execPath, healthcheck.slice(1), { env: { ...process.env, TOLLGATE_PORT: '1' }, timeout: 10_000 });
    expect(refused.status).toBe(1);
  });

  it('the Deployment probes /readyz and /healthz on the HTTP port, and both answer 200', async () => {
    const container = k8sContainer();
    const ports = Object.fromEntries((container.ports as { name: string; containerPort: number }[]).map((p) => [p.name, p.containerPort]));
    const options = resolveLaunch(k8sLaunch());
    expect(ports).toEqual({ http: options.port, grpc: options.grpcPort, admin: options.adminPort });
    // The admin listener is on the pod's addresses for Prometheus, which the annotations point at.
    expect(options.adminHost).toBe('0.0.0.0');
    expect(at(k8s('Deployment'), 'spec', 'template', 'metadata', 'annotations')).toMatchObject({ 'prometheus.io/port': String(options.adminPort), 'prometheus.io/path': '/metrics' });
    expect(at(container, 'readinessProbe', 'httpGet')).toEqual({ path: '/readyz', port: 'http' });
    expect(at(container, 'livenessProbe', 'httpGet')).toEqual({ path: '/healthz', port: 'http' });
    for (const path of ['/readyz', '/healthz']) expect((await fetch(service.url(path))).status, path).toBe(200);
    // The metrics token the Secret must hold guards /metrics, as Prometheus's bearer token.
    expect((await fetch(service.admin('/metrics'))).status).toBe(401);
    expect((await fetch(service.admin('/metrics'), { headers: { authorization: `Bearer ${SECRET_TOKEN}` } })).status).toBe(200);
    expect((await fetch(service.url('/no-such-probe'))).status).toBe(404);
  });

  it('the Service and the image expose the ports the service listens on by default', () => {
    const options = resolveLaunch(dockerLaunch());
    const servicePorts = at(k8s('Service'), 'spec', 'ports') as { name: string; port: number; targetPort: string }[];
    expect(servicePorts.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['http', options.port, 'http'],
      ['grpc', options.grpcPort, 'grpc'],
    ]);
    const exposed = dockerInstructions().find((instruction) => instruction.keyword === 'EXPOSE')!.rest.split(/\s+/).map(Number);
    expect(exposed).toEqual([options.port, options.grpcPort]);
    expect(dockerJson('ENTRYPOINT')).toEqual(['node', 'dist/cli/main.js']);
  });
});

describe('every stop timeout outlasts the drain (drain delay + shutdown timeout)', () => {
  const seconds = (value: string) => Number(/^(\d+)s?$/.exec(value)![1]) * 1000;

  it('Kubernetes: terminationGracePeriodSeconds, and no preStop hook (tollgate drains on SIGTERM)', () => {
    const pod = at(k8s('Deployment'), 'spec', 'template', 'spec') as Tree;
    expect((pod.terminationGracePeriodSeconds as number) * 1000).toBeGreaterThan(drainBudgetMs(resolveLaunch(k8sLaunch())));
    expect(at(k8sContainer(), 'lifecycle', 'preStop')).toBeUndefined();
  });

  it('docker compose: stop_grace_period', () => {
    const grace = at(parseYaml(text('deploy/docker-compose.yml')), 'services', 'tollgate', 'stop_grace_period') as string;
    expect(seconds(grace)).toBeGreaterThan(drainBudgetMs(resolveLaunch(composeLaunch())));
  });

  it('systemd: TimeoutStopSec, SIGTERM to the main process only', () => {
    const unit = systemdSettings();
    expect(seconds(unit.TimeoutStopSec!)).toBeGreaterThan(drainBudgetMs(resolveLaunch(systemdLaunch())));
    expect([unit.KillSignal, unit.KillMode, unit.Restart]).toEqual(['SIGTERM', 'mixed', 'on-failure']);
    expect(unit.EnvironmentFile).toMatch(/\/etc\/tollgate\/env$/);
  });

  it('the defaults alone also fit (a deployment that drops the explicit timings stays safe)', () => {
    const defaults = resolveServiceOptions({}, {});
    expect(drainBudgetMs(defaults)).toBeLessThan(seconds(systemdSettings().TimeoutStopSec!));
    expect(dirname(systemdSettings().ExecStart!.split(/\s+/)[1]!)).toBe('/opt/tollgate/dist/cli');
  });
});
