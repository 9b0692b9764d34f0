/**
 * The deployment files (deploy/, examples/envoy/) against the service they deploy: every flag and
 * TOLLGATE_* variable they give `tollgate serve` exists and resolves, every manifest parses, the
 * compose file's paths exist, Envoy asks Tollgate's gRPC port, the health checks and probes ask
 * endpoints a running service answers (the image's `tollgate health` against services on a --port
 * flag, on TLS and on mutual TLS), the example tokens are refused by name, and every stop timeout
 * outlasts the drain.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions, type ServiceOptions } from '../src/service/options.js';
import { TestCertificates } from './support/certs.js';
import { startServiceProcess, type ServiceProcess } from './support/service.js';

const root = new URL('..', import.meta.url).pathname;
const deployDir = join(root, 'deploy');
const CLI = join(root, 'dist/cli/main.js');
const text = (path: string) => readFileSync(join(root, path), 'utf8');
/** Longest a `tollgate` command run here may take: loading the CLI takes seconds on a busy 2-core machine. */
const COMMAND_MS = 20_000;

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

/** The image's environment (its ENV instructions). */
function dockerEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { keyword, rest } of dockerInstructions()) {
    if (keyword !== 'ENV') continue;
    for (const [, name, value] of rest.matchAll(/(\w+)=(\S+)/g)) env[name!] = value!;
  }
  return env;
}

/** What the container runs: the ENTRYPOINT after `tollgate`, then the CMD or what replaces it (compose's command, a pod's args). */
function containerArgs(command: readonly string[]): string[] {
  const [program, ...entrypoint] = dockerJson('ENTRYPOINT');
  expect(program).toBe('tollgate');
  return [...entrypoint, ...command];
}

function dockerLaunch(): Launch {
  return { where: 'Dockerfile', args: containerArgs(dockerJson('CMD')), env: dockerEnv() };
}

function composeLaunch(): Launch {
  const service = at(parseYaml(text('deploy/docker-compose.yml')), 'services', 'tollgate') as Tree;
  return { where: 'docker-compose.yml', args: containerArgs(service.command as string[]), env: { ...dockerEnv(), ...(service.environment as Record<string, string>) } };
}

function systemdSettings(): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const line of text('deploy/tollgate.service').split('\n')) {
    const match = /^(\w+)=(.*)$/.exec(line);
    if (match) settings[match[1]!] = match[2]!;
  }
  return settings;
}

/** deploy/tollgate.env's variables; `commented`: with the commented-out `TOLLGATE_*=` lines too. */
function envFile(commented = false): Record<string, string> {
  return Object.fromEntries(
    text('deploy/tollgate.env')
      .split('\n')
      .map((line) => (commented ? line.replace(/^# (TOLLGATE_\w+=)/, '$1') : line))
      .filter((line) => /^\w+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

function systemdLaunch(): Launch {
  const [program, ...args] = systemdSettings().ExecStart!.split(/\s+/);
  expect(program).toBe('tollgate');
  return { where: 'tollgate.service', args, env: envFile() };
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
  return { where: 'k8s/deployment.yaml', args: containerArgs(container.args as string[]), env: { ...dockerEnv(), ...env } };
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
  const help = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8', timeout: COMMAND_MS }).stdout;

  it.each(LAUNCHES.map((launch) => [launch().where, launch] as const))('%s: every serve flag exists, is in serve --help, and resolves, with the rules', (_name, launch) => {
    const { args, where } = launch();
    const flags = args.filter((arg) => arg.startsWith('--'));
    expect(resolveLaunch(launch()).config, where).toBe('/etc/tollgate/rules');
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

  it("systemd: ExecStart runs the package's command by name, which systemd finds where `npm install -g` links it ($(npm prefix -g)/bin)", () => {
    const command = systemdSettings().ExecStart!.split(/\s+/)[0]!;
    expect(Object.keys((JSON.parse(text('package.json')) as { bin: Record<string, string> }).bin)).toEqual([command]);
    expect(text('deploy/tollgate.service')).toContain('$(npm prefix -g)/bin/tollgate: /usr/local/bin/tollgate or /usr/bin/tollgate');
  });

  it("deploy/tollgate.env's example tokens, once uncommented, are refused by name with how to make one; a real token passes", () => {
    const uncommented = envFile(true);
    expect(Object.keys(uncommented)).toEqual(expect.arrayContaining(['TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_METRICS_TOKEN']));
    const args = ['serve'];
    expect(() => resolveLaunch({ where: 'env', args, env: uncommented })).toThrow(/is still the example's placeholder "CHANGE_ME[^"]*": set a token of your own \(make one with `openssl rand -hex 32`\)/);
    const real = 'a3f9c2e17b5d4e8f90a1b2c3d4e5f607';
    expect(resolveLaunch({ where: 'env', args, env: { ...uncommented, TOLLGATE_ADMIN_TOKEN: real, TOLLGATE_METRICS_TOKEN: real } }).adminToken).toBe(real);
    // The placeholders pass the length check: only their name refuses them.
    for (const name of ['TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_METRICS_TOKEN']) expect(uncommented[name]!.length).toBeGreaterThanOrEqual(16);
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
      const result = spawnSync(process.execPath, [CLI, 'validate', dir], { encoding: 'utf8', timeout: COMMAND_MS });
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

  it('runs `tollgate serve` with the flags given after the image name added (docker run IMAGE --redis URL keeps the rules)', () => {
    expect(dockerJson('ENTRYPOINT')).toEqual(['tollgate', 'serve']);
    expect(dockerJson('CMD')).toEqual([]);
    // `docker run IMAGE --redis redis://redis:6379 --port 9000`: the flags follow the entry point.
    const options = resolveLaunch({ where: 'docker run', args: containerArgs(['--redis', 'redis://redis:6379', '--port', '9000']), env: dockerEnv() });
    expect([options.config, options.redis, options.port]).toEqual(['/etc/tollgate/rules', 'redis://redis:6379', 9000]);
    // `tollgate` is the package's own command, linked onto the PATH as `npm install -g` links it.
    const link = dockerInstructions().find((i) => i.keyword === 'RUN' && i.rest.includes('/usr/local/bin/tollgate'))!.rest;
    const bin = (JSON.parse(text('package.json')) as { bin: Record<string, string> }).bin.tollgate!;
    expect(link).toContain(`ln -s /app/${bin.replace(/^\.\//, '')} /usr/local/bin/tollgate`);
    expect(link).toMatch(/chmod 755 dist\/cli\/main\.js/);
    expect(text(bin).split('\n')[0]).toBe('#!/usr/bin/env node');
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

/** A temporary path for a service's address file (the image's own, /tmp/tollgate-addresses.json, would be shared). */
const addressFilePath = (dir: string) => join(dir, 'addresses.json');

/** The Dockerfile's HEALTHCHECK command run as written (/app is this checkout), in the image's environment but for the address file. */
function runHealthcheck(addressFile: string): { status: number | null; output: string } {
  const [program, script, ...args] = dockerJson('HEALTHCHECK');
  expect([program, script]).toEqual(['node', '/app/dist/cli/health-check.js']);
  const result = spawnSync(process.execPath, [join(root, script!.slice('/app/'.length)), ...args], { env: { ...process.env, ...dockerEnv(), TOLLGATE_ADDRESS_FILE: addressFile }, encoding: 'utf8', timeout: COMMAND_MS });
  return { status: result.status, output: result.stdout + result.stderr };
}

describe('health checks and probes ask endpoints the running service answers', () => {
  const rulesDir = mkdtempSync(join(tmpdir(), 'tollgate-deploy-'));
  let service: ServiceProcess;
  beforeAll(async () => {
    for (const [name, body] of Object.entries(at(k8s('ConfigMap'), 'data') as Record<string, string>)) writeFileSync(join(rulesDir, name), body);
    const { env } = k8sLaunch(); // the Deployment's own settings (the image's among them), with its ConfigMap's rules
    // `--port 0` (startServiceProcess) is a flag, while the image's TOLLGATE_PORT says 8080: the health check must follow the flag.
    service = await startServiceProcess(['--config', rulesDir, '--log-level', 'info'], { ...env, TOLLGATE_DRAIN_DELAY: '0', TOLLGATE_ADMIN_PORT: '0', TOLLGATE_ADDRESS_FILE: addressFilePath(rulesDir) });
  }, 20_000);
  afterAll(async () => {
    await service?.stop();
    rmSync(rulesDir, { recursive: true, force: true });
  });

  it("the Dockerfile's HEALTHCHECK, run as written, passes against a service whose --port flag overrides the image's TOLLGATE_PORT", () => {
    expect(dockerEnv().TOLLGATE_PORT).toBe('8080');
    expect(service.httpPort).not.toBe(8080);
    const healthy = runHealthcheck(addressFilePath(rulesDir));
    expect(healthy.output).toBe(`healthy: http://127.0.0.1:${service.httpPort}/healthz\n`);
    expect(healthy.status).toBe(0);
  });

  it('the health check is `tollgate health` without the rest of the CLI: it loads no module of the service', () => {
    const imports = (file: string) => [...text(file).matchAll(/^import .* from '([^']+)';$/gm)].map((match) => match[1]);
    expect(imports('dist/cli/health-check.js')).toEqual(['./health.js']);
    expect(imports('dist/cli/health.js').filter((module) => !module!.startsWith('node:'))).toEqual(['../options.js']);
    const help = spawnSync(process.execPath, [CLI, 'health', '--help'], { encoding: 'utf8', timeout: COMMAND_MS });
    expect(help.stdout).toMatch(/^Usage: tollgate health \[--address-file FILE\]/);
  });

  it('the health check fails (exit 1) on an address where nothing listens, and without an address file', () => {
    const dead = join(rulesDir, 'dead.json');
    writeFileSync(dead, JSON.stringify({ pid: 1, http: 'http://127.0.0.1:1', admin: 'http://127.0.0.1:1', clientCertificates: false }));
    const refused = runHealthcheck(dead);
    expect([refused.status, refused.output]).toEqual([1, expect.stringMatching(/^tollgate health: http:\/\/127\.0\.0\.1:1\/healthz: .*ECONNREFUSED/)]);
    const missing = runHealthcheck(join(rulesDir, 'none.json'));
    expect([missing.status, missing.output]).toEqual([1, expect.stringMatching(/no address file at .*none\.json: the service has not started listening yet/)]);
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
  });
});

describe("the image's HEALTHCHECK over TLS and mutual TLS", () => {
  const certificates = new TestCertificates();
  const files = (name: string) => addressFilePath(certificates.dir).replace('addresses', name);
  let tls: ServiceProcess;
  let mutual: ServiceProcess;
  beforeAll(async () => {
    const ca = certificates.ca('ca');
    const server = certificates.issue(ca, 'server', 'server');
    const flags = ['--config', join(root, 'examples/rules'), '--tls-cert', server.cert, '--tls-key', server.key];
    [tls, mutual] = await Promise.all([
      startServiceProcess([...flags, '--address-file', files('tls')]),
      startServiceProcess([...flags, '--tls-client-ca', ca.cert, '--address-file', files('mutual')]),
    ]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all([tls?.stop(), mutual?.stop()]);
    certificates.close();
  });

  it('with TLS it asks the decision listener over HTTPS', () => {
    const healthy = runHealthcheck(files('tls'));
    expect(healthy.output).toBe(`healthy: https://127.0.0.1:${tls.httpPort}/healthz\n`);
    expect(healthy.status).toBe(0);
  });

  it('with mutual TLS (the decision listener wants a client certificate) it asks the admin listener', async () => {
    await expect(fetch(`https://127.0.0.1:${mutual.httpPort}/healthz`)).rejects.toThrow();
    const healthy = runHealthcheck(files('mutual'));
    expect(healthy.output).toBe(`healthy: https://127.0.0.1:${mutual.adminPort}/healthz\n`);
    expect(healthy.status).toBe(0);
  });

  it('an address file that cannot be written stops the start (exit 2), naming the flag and the fix', () => {
    const missingDir = join(certificates.dir, 'no-such-dir', 'addresses.json');
    const result = spawnSync(process.execPath, [CLI, 'serve', '--port', '0', '--grpc-port', '0', '--admin-port', '0', '--address-file', missingDir], { encoding: 'utf8', timeout: COMMAND_MS });
    expect(result.stderr).toContain(`--address-file (or TOLLGATE_ADDRESS_FILE) ${missingDir} cannot be written: ENOENT`);
    expect(result.stderr).toContain('give a path in a writable directory (e.g. /tmp), or leave it unset');
    expect(result.status).toBe(2);
  });

  it('a stopped service removes its address file, and the health check fails', async () => {
    expect(existsSync(files('tls'))).toBe(true);
    expect(await tls.stop()).toBe(0);
    expect(existsSync(files('tls'))).toBe(false);
    expect(runHealthcheck(files('tls')).status).toBe(1);
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
  });
});
