#!/usr/bin/env node
/**
 * The `tollgate` command: `serve` (the decision service), `validate` (check rules files),
 * `gateway` (a rate-limiting reverse proxy), `replicate` (carry one region's counts to the others,
 * multi-region), `simulate` (replay an access log against rules offline), `health` (a container's health check, health.ts), `demo` (the limiter
 * deciding on the embedded store), `check`, `rules`, `keys` (a running service's API, src/cli/admin/), `help` (or `--help` after any command), `--version`. `bench`
 * arrives with its issue.
 */
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ADMIN_COMMANDS, runAdminCommand, type AdminCommand } from './admin/index.js';
import { runDemo } from './demo.js';
import { runHealthCommand } from './health.js';
import { GATEWAY_FLAGS, GATEWAY_SWITCHES, resolveGatewayOptions } from '../gateway/options.js';
import { startGateway } from '../gateway/server.js';
import { GatewayConfigError, TollgateError } from '../errors.js';
import { SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions, startReportsPrimary, startService } from '../service/index.js';
import { REPLICATE_FLAGS, startReplicateCommand } from './replicate.js';
import { checkRuleFiles } from '../rules/files.js';
import { countDescriptors } from '../rules/parse/index.js';
import { runSimulateCommand } from '../simulate/command.js';

const USAGE = `Usage: tollgate <command> [options]

Commands:
  serve         Run the decision service (HTTP JSON on --port, envoy gRPC on --grpc-port; the
                dashboard, /metrics, /v1/events and the admin API on --admin-port)
                  --config FILE|DIR        rules (YAML), watched and reloaded live
                  --redis URL              share counters and rules through Redis
                  --redis-cluster H:P,...  ... or through a Redis Cluster (default: memory store)
                  --redis-sentinel H:P,... ... or a Sentinel-watched primary (--redis-sentinel-name, mymaster)
                  --port N (8080) --grpc-port N (8081) --host ADDR (0.0.0.0)
                  --grpc-server S          what serves gRPC: http2 (node:http2) or grpc-js (http2)
                  --admin-port N           the admin listener: dashboard, metrics, events, rules,
                                           admin API (6070); --port answers 404 for those
                  --admin-bind ADDR        its address (127.0.0.1: loopback; 0.0.0.0 to open it,
                                           with --metrics-token, or --admin-public to leave it open)
                  --admin-public           the admin listener beyond loopback without a metrics token
                  --admin-token TOKEN      enables PUT /v1/rules and the key admin endpoints
                  --metrics-token TOKEN    required for /metrics, /dashboard, /v1/events, GET /v1/rules
                                           (Bearer; the admin token also opens them)
                  --admin-token-file FILE, --metrics-token-file FILE  the tokens from files (ps shows flags)
                  --tls-cert FILE          HTTPS and gRPC over TLS on every listener: the PEM
                  --tls-key FILE           certificate chain and its key, reloaded when they change
                  --tls-client-ca FILE     mutual TLS on the decision listeners (HTTP and gRPC):
                                           clients need a certificate this CA signed
                  --tls-client-san NAME    ... and carrying NAME among its alternative names
                  --log-level LEVEL        fatal|error|warn|info|debug|trace|silent (info)
                  --workers N              N processes on the same ports (needs Redis) (1)
                  --max-keys N             keys the memory store holds; the least recently used
                                           is evicted when full (1000000; not with Redis)
                  --drain-delay MS         on SIGTERM, /readyz says draining and requests are still
                                           served this long before the listeners close (5000; 0..600000)
                  --shutdown-timeout MS    then in-flight requests get this long to finish (10000)
                  --keep-alive-timeout MS  idle keep-alive connections closed after (65000: above an ALB's 60 s)
                  --headers-timeout MS     headers within (5000); a connection silent this long is closed
                  --request-timeout MS     a whole request within (10000)
                  --max-requests-per-socket N  requests per connection (0: no cap)
                  --grpc-idle-timeout D    gRPC: GOAWAY to a connection with no call this long (5m; 0: never)
                  --grpc-max-connection-age D  ... to any connection this old (24h; 0: never),
                  --grpc-max-connection-age-grace D  cut this long after (1h)
                  --grpc-receive-timeout D  a call's request within (10s), else DEADLINE_EXCEEDED
                  --grpc-max-concurrent-streams N  calls per connection (100)
                  --grpc-max-connections N  connections at once (10000); durations: ms or 30s, 5m
                  --settings FILE          YAML/JSON of these settings (flags and env win)
                  --address-file FILE      once listening, write the listeners' URLs there (JSON),
                                           for tollgate health; removed at stop
                when the store fails, is slow or its breaker is open (docs/operations.md):
                  --failure-mode MODE      local (each node enforces limit / --expected-nodes),
                                           open (admit) or closed (refuse) (local)
                  --expected-nodes N       nodes sharing the store, for local (1)
                  --deadline-ms MS         longest wait for the store per check (50)
                  --fail-closed-status S   429 (OVER_LIMIT) or 503 (UNAVAILABLE) for closed (429)
                envoyproxy/ratelimit's settings (docs/service.md, "Settings from envoy"):
                  --merge-domains          one domain across several files is merged (MERGE_DOMAIN_CONFIG)
                  --response-headers       add RateLimit-Limit/-Remaining/-Reset to envoy answers
                                           (LIMIT_RESPONSE_HEADERS_ENABLED); names: --header-limit,
                                           --header-remaining, --header-reset NAME
                  --response-dynamic-metadata  answers carry dynamic_metadata (RESPONSE_DYNAMIC_METADATA)
                  --shadow-mode            never answer OVER_LIMIT overall (SHADOW_MODE)
                  --quota-mode             every limit in quota mode (QUOTA_MODE)
                Every flag also reads TOLLGATE_<FLAG> (e.g. TOLLGATE_REDIS); flags win.
  gateway       A reverse proxy that rate limits, then forwards (docs/gateway.md)
                  --config FILE            routes, upstreams, rules (YAML, envoy's route config shape);
                                           reloaded live; errors as file:line:col (exit 2)
                  --port N                 where the proxy listens (the file's listen, else 8888)
                  --admin-port N           /metrics, /dashboard, /readyz, /v1/rules, admin API (9901)
                  --admin-bind ADDR        the admin port's address (127.0.0.1)
                  --rules FILE|DIR         the rules (overrides the file's rules:)
                  --host ADDR              the proxy's address (0.0.0.0)
                  --tls-cert FILE          HTTPS on the proxy and the admin port: the PEM certificate
                  --tls-key FILE           chain and its key, reloaded when they change
                  --tls-client-ca FILE     mutual TLS on the proxy: clients need a certificate this CA
                  --tls-client-san NAME    signed (... and carrying NAME among its alternative names)
                  and serve's --redis*, --admin-token(-file), --metrics-token(-file), --admin-public, --log-level, --failure-mode, --expected-nodes,
                  --deadline-ms, --fail-closed-status, --local-cache-keys, --merge-domains,
                  --shadow-mode, --quota-mode, --drain-delay, --shutdown-timeout,
                  --keep-alive-timeout, --headers-timeout, --max-requests-per-socket, --max-keys
  replicate     Carry one region's counts to the other regions (multi-region, docs/scaling.md)
                  --region NAME            this region (the regionStore's region)
                  --redis URL              this region's own Redis
                  --peer NAME=URL          another region and its Redis; repeat for each
                  --interval-ms MS         how often changes are sent (50)
                  --key-prefix PREFIX      the stores' key prefix (tollgate:)
  simulate      Replay an access log against rules offline, with the real algorithms and the log's
                own times, and report per limit: allowed, throttled, busiest keys, when (docs/simulate.md)
                  --rules DIR|FILE         the rules (as serve --config)
                  --log FILE               the access log: Common/Combined Log Format or JSON lines
                  --format F               clf, combined or jsonl (default: from the first line)
                  --field NAME=MEMBER      JSON lines: read field NAME from MEMBER (a.b for nested)
                  --domain D               a domain to check each line against (repeat; default all)
                  --descriptor KEY=FIELD   an entry of that descriptor (repeat; default remote_address=ip)
                  --map FILE               YAML: several requests per line, literal values, when:
                  --algorithm A[,B...]     replay once per algorithm, every limit on it, side by side
                  --compare-to A           count per limit the decisions that differ from A's
                  --top N                  busiest keys per limit (10)
                  --json                   the report as JSON on stdout
                  --html FILE              also write a self-contained HTML report with charts
                  --strict                 stop at the first malformed line (exit 1)
  demo          Show every algorithm deciding a burst of requests on the embedded memory store
  validate PATH Check a rules file, or a directory of *.yaml/*.json files: prints "OK: N domains,
                M descriptors" (exit 0) or every error as file:line:col: path: message (exit 1)
                  --merge-domains          as serve's (or TOLLGATE_MERGE_DOMAINS=true)
  check         One decision from a running service: --domain D --descriptor K=V[,K=V...] [--hits N]
                (exit 0 OK, 1 OVER_LIMIT, 2 bad flags, 3 service unreachable or erroring)
  rules         get [--domain D] | push FILE|DIR | diff FILE|DIR: the running service's rules
  keys          inspect|reset|block|unblock|blocked: the running service's key admin endpoints
                these three: --url URL (check: http://127.0.0.1:8080, TOLLGATE_URL; rules, keys:
                the admin listener http://127.0.0.1:6070, TOLLGATE_ADMIN_URL), admin token from
                TOLLGATE_ADMIN_TOKEN or --token-file FILE, --json, --timeout MS; each has --help
                (docs/service.md, "Command line for the admin API")
  health        Exit 0 when the tollgate serve of this host answers /healthz, 1 if not: a
                container's health check (--address-file FILE: serve's; --timeout DURATION, 2s)
  help          Show this help (as does --help after any command)

Options:
  -h, --help     Show this help
  -v, --version  Show the version
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  if (first === 'help') return help(rest);
  if (first === 'serve') return serve(rest);
  if (first === 'gateway') return gateway(rest);
  if (first === 'validate') return validate(rest);
  if (first === 'replicate') return replicate(rest);
  if (first === 'simulate') return simulateCommand(rest);
  if (first === 'health') return runHealthCommand(rest, process.env, { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) });
  if ((ADMIN_COMMANDS as readonly string[]).includes(first ?? '')) return runAdminCommand(first as AdminCommand, rest, { stdout: (text) => process.stdout.write(text), stderr: (text) => process.stderr.write(text) });
  if (first === 'demo') {
    if (rest.length === 1 && HELP_FLAGS.has(rest[0]!)) return help([]);
    if (rest.length > 0) return usageError(`demo takes no arguments, got ${JSON.stringify(rest.join(' '))}`);
    await runDemo((line) => process.stdout.write(`${line}\n`));
    return 0;
  }
  if (first !== undefined && !first.startsWith('-')) {
    process.stderr.write(`tollgate: unknown command ${JSON.stringify(argv.join(' '))}\n\n${USAGE}`);
    return 2;
  }
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } } }));
  } catch (error) {
    return usageError((error as Error).message);
  }
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (first === undefined) {
    process.stdout.write(USAGE);
    return 2;
  }
  process.stderr.write(`tollgate: unknown command ${JSON.stringify(argv.join(' '))}\n\n${USAGE}`);
  return 2;
}

const COMMANDS = new Set(['serve', 'gateway', 'validate', 'replicate', 'simulate', 'demo', 'health', ...ADMIN_COMMANDS, 'help']);
const HELP_FLAGS = new Set(['--help', '-h']);
/** The `--help` / `-h` flag every command takes. */
const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/** `tollgate help [COMMAND]`, `tollgate COMMAND --help`: the usage on stdout, exit 0. */
function help(args: string[]): number {
  if (args.length > 1 || (args.length === 1 && !COMMANDS.has(args[0]!))) {
    return usageError(`help takes one of the commands ${[...COMMANDS].join(', ')}, got ${JSON.stringify(args.join(' '))}`);
  }
  process.stdout.write(USAGE);
  return 0;
}

function usageError(message: string): number {
  process.stderr.write(`tollgate: ${message}\n\n${USAGE}`);
  return 2;
}

/** A command's flags as text (switches as "true"), or the exit code once help or a usage error is printed. */
function commandFlags(command: string, args: string[], flags: Readonly<Record<string, string>>, switches: ReadonlySet<string>): Record<string, string | undefined> | number {
  try {
    const options = { ...Object.fromEntries(Object.keys(flags).map((flag) => [flag, { type: switches.has(flag) ? ('boolean' as const) : ('string' as const) }])), ...HELP_OPTION };
    const { help: wantsHelp, ...given } = parseArgs({ args, options, allowPositionals: false }).values as Record<string, string | boolean | undefined> & { help?: boolean };
    if (wantsHelp === true) return help([]);
    return Object.fromEntries(Object.entries(given).map(([flag, value]) => [flag, value === undefined ? undefined : String(value)]));
  } catch (error) {
    return usageError(`${command}: ${(error as Error).message}`);
  }
}

/**
 * `tollgate serve`: runs until SIGTERM or SIGINT, then drains (--drain-delay) and shuts down
 * gracefully; a second signal skips the rest of the drain delay.
 */
async function serve(args: string[]): Promise<number> {
  const values = commandFlags('serve', args, SERVE_FLAGS, SWITCH_FLAGS);
  if (typeof values === 'number') return values;
  let service;
  try {
    const options = resolveServiceOptions(values, process.env);
    if (options.workers > 1 && cluster.isPrimary) return runWorkers(options.workers);
    service = await startService(options);
  } catch (error) {
    const known = error instanceof TollgateError;
    process.stderr.write(`tollgate serve: ${known ? (error as Error).message : String((error as Error).stack ?? error)}\n`);
    // Exit now: a connection opened before the failure must not keep the process alive.
    process.exit(known ? 2 : 1);
  }
  await new Promise<void>((resolve) => {
    let signals = 0;
    const stop = (signal: NodeJS.Signals): void => {
      signals += 1;
      if (signals === 2) service.context.logger.info({ signal }, 'second signal: skipping the rest of the drain delay');
      if (signals > 1) {
        void service.drain();
        return;
      }
      // A cluster worker's IPC channel would keep it alive: leave once closed.
      void service.drain().then(() => (cluster.isWorker ? process.exit(0) : resolve()));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  // Everything is closed; a timer left by a call still waiting on Redis must not hold the exit.
  setTimeout(() => process.exit(0), 1_000).unref();
  return 0;
}

/** `tollgate gateway`: runs until SIGTERM or SIGINT, then drains and stops; 2 on a bad flag or configuration. */
async function gateway(args: string[]): Promise<number> {
  const values = commandFlags('gateway', args, GATEWAY_FLAGS, GATEWAY_SWITCHES);
  if (typeof values === 'number') return values;
  let running;
  try {
    running = await startGateway(resolveGatewayOptions(values, process.env));
  } catch (error) {
    const known = error instanceof TollgateError;
    // Configuration problems go one per line, each starting file:line:col, as `validate` prints them.
    const lines = error instanceof GatewayConfigError && error.errors.length > 0 ? error.errors.map((problem) => problem.message) : [`tollgate gateway: ${known ? (error as Error).message : String((error as Error).stack ?? error)}`];
    process.stderr.write(lines.map((line) => `${line}\n`).join(''));
    process.exit(known ? 2 : 1);
  }
  await new Promise<void>((resolve) => {
    let signals = 0;
    const stop = (): void => {
      signals += 1;
      if (signals > 1) void running.drain();
      else void running.drain().then(resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  setTimeout(() => process.exit(0), 1_000).unref();
  return 0;
}

/**
 * `--workers N`: N processes (node:cluster) share the HTTP and gRPC ports and one Redis. The primary
 * restarts a worker that dies unexpectedly and forwards SIGTERM/SIGINT for a graceful stop; it also
 * collects the workers' metrics and dashboard counts (service/cluster/primary.ts), keeping a dead worker's.
 */
async function runWorkers(count: number): Promise<number> {
  let stopping = false;
  // /metrics and the dashboard sum the workers' counts, including those of workers that exited.
  const reports = startReportsPrimary();
  const fork = (): void => {
    cluster.fork().once('exit', (code) => {
      if (!stopping) {
        process.stderr.write(`tollgate serve: a worker exited (code ${code}); starting another\n`);
        fork();
      }
    });
  };
  for (let i = 0; i < count; i++) fork();
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      const workers = Object.values(cluster.workers ?? {}).filter((worker) => worker !== undefined);
      // A second signal is forwarded too: the workers skip the rest of their drain delay.
      if (!stopping) {
        let running = workers.length;
        if (running === 0) resolve();
        for (const worker of workers) {
          worker.once('exit', () => {
            running -= 1;
            if (running === 0) resolve();
          });
        }
      }
      stopping = true;
      for (const worker of workers) if (worker.process.exitCode === null) worker.process.kill('SIGTERM');
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
  reports.stop();
  return 0;
}

/** `tollgate replicate`: runs until SIGTERM or SIGINT; 2 on bad flags, 1 when its Redis is unreachable. */
async function replicate(args: string[]): Promise<number> {
  let replicator;
  try {
    const { values } = parseArgs({ args, options: { ...REPLICATE_FLAGS, ...HELP_OPTION }, allowPositionals: false });
    if (values.help === true) return help([]);
    replicator = startReplicateCommand(values, (line) => process.stderr.write(`${line}\n`));
  } catch (error) {
    const message = (error as Error).message;
    return usageError(message.startsWith('replicate:') ? message : `replicate: ${message}`);
  }
  try {
    await replicator.ready();
  } catch (error) {
    process.stderr.write(`tollgate replicate: ${(error as Error).message}\n`);
    await replicator.close();
    // Exit now: ioredis keeps a timer of the closed, never-connected client for another 2 s.
    process.exit(1);
  }
  const { region, peers } = replicator.stats();
  process.stdout.write(`tollgate replicate: region ${region} → ${peers.map((peer) => peer.region).join(', ')}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await replicator.close();
  return 0;
}

/** `tollgate simulate`: 0 when the log was replayed, 1 when it could not be read, 2 on bad flags, rules or mapping. */
function simulateCommand(args: string[]): Promise<number> {
  if (args.some((arg) => HELP_FLAGS.has(arg))) return Promise.resolve(help([]));
  return runSimulateCommand(args, { stdout: process.stdout, stderr: process.stderr }, USAGE);
}

/** `tollgate validate PATH`: 0 when the rules load, 1 with every error on stderr, 2 on misuse. */
async function validate(args: string[]): Promise<number> {
  let mergeDomains: boolean;
  try {
    const parsed = parseArgs({ args, allowPositionals: true, options: { ...HELP_OPTION, 'merge-domains': { type: 'boolean' } } });
    if (parsed.values.help === true) return help([]);
    args = parsed.positionals;
    mergeDomains = parsed.values['merge-domains'] === true || resolveServiceOptions({}, { TOLLGATE_MERGE_DOMAINS: process.env.TOLLGATE_MERGE_DOMAINS }).mergeDomains;
  } catch (error) {
    return usageError(`validate: ${(error as Error).message}`);
  }
  if (args.length !== 1) {
    process.stderr.write(`tollgate: validate takes one PATH (a rules file or a directory of *.yaml/*.json files)\n\n${USAGE}`);
    return 2;
  }
  const { domains, errors } = await checkRuleFiles(args[0]!, { mergeDomains });
  if (errors.length > 0) {
    process.stderr.write(errors.map((error) => `${error.message}\n`).join(''));
    return 1;
  }
  const descriptors = domains.reduce((sum, domain) => sum + countDescriptors(domain.descriptors), 0);
  process.stdout.write(`OK: ${domains.length} domains, ${descriptors} descriptors\n`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
