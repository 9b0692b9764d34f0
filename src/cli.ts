#!/usr/bin/env node
/**
 * The `tollgate` command. Today: `--help`, `--version` and `demo` (the limiter deciding on the
 * embedded store); `serve`, `gateway`, `validate`, `simulate` and `bench` arrive with their issues.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';

const USAGE = `Usage: tollgate <command> [options]

Commands:
  demo          Show every algorithm deciding a burst of requests on the embedded memory store

Options:
  -h, --help     Show this help
  -v, --version  Show the version
`;

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
    });
  } catch (error) {
    process.stderr.write(`tollgate: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(USAGE);
    return values.help ? 0 : 2;
  }
  if (command === 'demo' && rest.length === 0) {
    await runDemo((line) => process.stdout.write(`${line}\n`));
    return 0;
  }
  process.stderr.write(`tollgate: unknown command ${JSON.stringify([command, ...rest].join(' '))}\n\n${USAGE}`);
  return 2;
}

process.exitCode = await main(process.argv.slice(2));
