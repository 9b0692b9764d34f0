#!/usr/bin/env node
/**
 * The `tollgate` command: `serve` (the decision service), `validate` (check rules files),
 * `gateway` (a rate-limiting reverse proxy), `replicate` (carry one region's counts to the others,
 * multi-region), `simulate` (replay an access log against rules offline), `health` (a container's health check, health.ts), `demo` (the limiter
 * deciding on the embedded store), `check`, `rules`, `keys`, `usage` (a running service's API, src/cli/admin/), `help` (or `--help` after any command), `--version`. `bench`
 * arrives with its issue. A command's module is imported only when it runs (dynamic import()).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ADMIN_COMMANDS, type AdminCommand } from './admin/commands.js';
import { flagErrorText } from './admin/output.js';
import { GLOBAL_USAGE, HELPED_COMMANDS, type HelpedCommand } from './global-usage.js';
import { GatewayConfigError, TollgateError } from '../errors.js';
import { closestMatch } from '../rules/parse/suggest.js';

// Each command's code (the service, the gateway, the rules parser, ...) is imported when that command
// runs: `tollgate --version` or `tollgate check` does not pay for loading the others.

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
  if (first === 'health') return (await import('./health.js')).runHealthCommand(rest, process.env, STD_OUTPUT);
  if ((ADMIN_COMMANDS as readonly string[]).includes(first ?? '')) return (await import('./admin/index.js')).runAdminCommand(first as AdminCommand, rest, STD_OUTPUT);
  if (first === 'demo') {
    if (rest.length === 1 && HELP_FLAGS.has(rest[0]!)) return help(['demo']);
    if (rest.length > 0) return usageError('demo', `takes no arguments, got ${JSON.stringify(rest.join(' '))}`);
    await (await import('./demo.js')).runDemo((line) => process.stdout.write(`${line}\n`));
    return 0;
  }
  if (first !== undefined && !first.startsWith('-')) {
    return unknownCommand(first);
  }
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } } }));
  } catch (error) {
    return flagError(undefined, error, ['help', 'version']);
  }
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  if (values.help) {
    process.stdout.write(GLOBAL_USAGE);
    return 0;
  }
  if (first === undefined) {
    process.stdout.write(GLOBAL_USAGE);
    return 2;
  }
  return unknownCommand(first);
}

/** An unknown command: named, with the closest one, in two lines. */
function unknownCommand(word: string): number {
  const suggestion = closestMatch(word, [...COMMANDS]);
  process.stderr.write(`tollgate: unknown command ${JSON.stringify(word)}${suggestion === undefined ? '' : ` (did you mean ${suggestion}?)`}\nsee tollgate --help\n`);
  return 2;
}

const COMMANDS = new Set(['serve', 'gateway', 'validate', 'replicate', 'simulate', 'demo', 'health', ...ADMIN_COMMANDS, 'help']);
const HELP_FLAGS = new Set(['--help', '-h']);
const STD_OUTPUT = { stdout: (text: string) => process.stdout.write(text), stderr: (text: string) => process.stderr.write(text) };
/** The `--help` / `-h` flag every command takes. */
const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const;

/** `tollgate help [COMMAND]`, `tollgate COMMAND --help`: the command's help (or the commands) on stdout, exit 0. */
async function help(args: string[]): Promise<number> {
  if (args.length > 1 || (args.length === 1 && !COMMANDS.has(args[0]!))) {
    return usageError('help', `takes one of the commands ${[...COMMANDS].join(', ')}, got ${JSON.stringify(args.join(' '))}`);
  }
  const [command] = args;
  if ((HELPED_COMMANDS as readonly string[]).includes(command ?? '')) process.stdout.write((await import('./command-help.js')).commandHelp(command as HelpedCommand));
  else if (command === 'health') return main(['health', '--help']);
  else if ((ADMIN_COMMANDS as readonly string[]).includes(command ?? '')) return main([command!, '--help']);
  else process.stdout.write(GLOBAL_USAGE);
  return 0;
}

/** A misused command: one line saying what is wrong, one saying where its help is; exit 2. */
function usageError(command: string, message: string): number {
  process.stderr.write(`tollgate ${command}: ${message}\nsee tollgate ${command} --help\n`);
  return 2;
}

/** A parseArgs error (unknown flag, missing value) as a short usage error; exit 2. */
function flagError(command: string | undefined, error: unknown, flags: readonly string[]): number {
  process.stderr.write(flagErrorText(command, error as Error, flags));
  return 2;
}

/** A command's flags as text (switches as "true"), or the exit code once help or a usage error is printed. */
function commandFlags(command: HelpedCommand, args: string[], flags: Readonly<Record<string, string>>, switches: ReadonlySet<string>): Promise<Record<string, string | undefined> | number> | Record<string, string | undefined> | number {
  try {
    const options = { ...Object.fromEntries(Object.keys(flags).map((flag) => [flag, { type: switches.has(flag) ? ('boolean' as const) : ('string' as const) }])), ...HELP_OPTION };
    const { help: wantsHelp, ...given } = parseArgs({ args, options, allowPositionals: false }).values as Record<string, string | boolean | undefined> & { help?: boolean };
    if (wantsHelp === true) return help([command]);
    return Object.fromEntries(Object.entries(given).map(([flag, value]) => [flag, value === undefined ? undefined : String(value)]));
  } catch (error) {
    return flagError(command, error, Object.keys(flags));
  }
}

/**
 * `tollgate serve`: runs until SIGTERM or SIGINT, then drains (--drain-delay) and shuts down
 * gracefully; a second signal skips the rest of the drain delay.
 */
async function serve(args: string[]): Promise<number> {
  const { default: cluster } = await import('node:cluster');
  const { SERVE_FLAGS, SWITCH_FLAGS, resolveServiceOptions, startService } = await import('../service/index.js');
  const values = await commandFlags('serve', args, SERVE_FLAGS, SWITCH_FLAGS);
  if (typeof values === 'number') return values;
  let service;
  try {
    const options = resolveServiceOptions(values, process.env);
    if (options.workers > 1 && cluster.isPrimary) return (await import('./workers.js')).runWorkers(options.workers);
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
  const { GATEWAY_FLAGS, GATEWAY_SWITCHES, resolveGatewayOptions } = await import('../gateway/options.js');
  const { startGateway } = await import('../gateway/server.js');
  const values = await commandFlags('gateway', args, GATEWAY_FLAGS, GATEWAY_SWITCHES);
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

/** `tollgate replicate`: runs until SIGTERM or SIGINT; 2 on bad flags, 1 when its Redis is unreachable. */
async function replicate(args: string[]): Promise<number> {
  const { REPLICATE_FLAGS, startReplicateCommand } = await import('./replicate.js');
  let replicator;
  try {
    const { values } = parseArgs({ args, options: { ...REPLICATE_FLAGS, ...HELP_OPTION }, allowPositionals: false });
    if (values.help === true) return help(['replicate']);
    replicator = startReplicateCommand(values, (line) => process.stderr.write(`${line}\n`));
  } catch (error) {
    if (!(error instanceof TollgateError)) return flagError('replicate', error, Object.keys(REPLICATE_FLAGS));
    return usageError('replicate', (error as Error).message.replace(/^replicate: /, ''));
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
async function simulateCommand(args: string[]): Promise<number> {
  if (args.some((arg) => HELP_FLAGS.has(arg))) return help(['simulate']);
  const { SIMULATE_FLAGS, runSimulateCommand } = await import('../simulate/command.js');
  try {
    // Flags only: an unknown one is answered here, with the closest known one.
    parseArgs({ args, options: SIMULATE_FLAGS, allowPositionals: false });
  } catch (error) {
    return flagError('simulate', error, Object.keys(SIMULATE_FLAGS));
  }
  return runSimulateCommand(args, { stdout: process.stdout, stderr: process.stderr }, 'see tollgate simulate --help\n');
}

/** `tollgate validate PATH`: 0 when the rules load, 1 with every error on stderr, 2 on misuse. */
async function validate(args: string[]): Promise<number> {
  const { resolveServiceOptions } = await import('../service/index.js');
  let mergeDomains: boolean;
  try {
    const parsed = parseArgs({ args, allowPositionals: true, options: { ...HELP_OPTION, 'merge-domains': { type: 'boolean' } } });
    if (parsed.values.help === true) return help(['validate']);
    args = parsed.positionals;
    mergeDomains = parsed.values['merge-domains'] === true || resolveServiceOptions({}, { TOLLGATE_MERGE_DOMAINS: process.env.TOLLGATE_MERGE_DOMAINS }).mergeDomains;
  } catch (error) {
    if (error instanceof TollgateError) return usageError('validate', error.message);
    return flagError('validate', error, ['merge-domains']);
  }
  if (args.length !== 1) return usageError('validate', 'takes one PATH (a rules file or a directory of *.yaml/*.json files)');
  const { checkRuleFiles } = await import('../rules/files.js');
  const { countDescriptors } = await import('../rules/parse/index.js');
  const { domains, errors } = await checkRuleFiles(args[0]!, { mergeDomains });
  if (errors.length > 0) {
    process.stderr.write(errors.map((error) => `${error.message}\n`).join(''));
    return 1;
  }
  const descriptors = domains.reduce((sum, domain) => sum + countDescriptors(domain.descriptors), 0);
  process.stdout.write(`OK: ${counted(domains.length, 'domain')}, ${counted(descriptors, 'descriptor')}\n`);
  return 0;
}

/** `1 domain`, `2 domains`. */
function counted(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

process.exitCode = await main(process.argv.slice(2));
