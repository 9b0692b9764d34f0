#!/usr/bin/env node
/**
 * The `tollgate` command. Today: `--help`, `--version`, `demo` (the limiter deciding on the
 * embedded store) and `validate` (check rules files); `serve`, `gateway`, `simulate` and `bench`
 * arrive with their issues.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runDemo } from './demo.js';
import { checkRuleFiles } from './rules/files.js';
import { countDescriptors } from './rules/parse.js';

const USAGE = `Usage: tollgate <command> [options]

Commands:
  demo          Show every algorithm deciding a burst of requests on the embedded memory store
  validate PATH Check a rules file, or a directory of *.yaml files: prints "OK: N domains,
                M descriptors" (exit 0) or every error as file:line:col: path: message (exit 1)

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
  if (command === 'validate') return validate(rest);
  process.stderr.write(`tollgate: unknown command ${JSON.stringify([command, ...rest].join(' '))}\n\n${USAGE}`);
  return 2;
}

/** `tollgate validate PATH`: 0 when the rules load, 1 with every error on stderr, 2 on misuse. */
async function validate(args: string[]): Promise<number> {
  if (args.length !== 1) {
    process.stderr.write(`tollgate: validate takes one PATH (a rules file or a directory of *.yaml files)\n\n${USAGE}`);
    return 2;
  }
  const { domains, errors } = await checkRuleFiles(args[0]!);
  if (errors.length > 0) {
    process.stderr.write(errors.map((error) => `${error.message}\n`).join(''));
    return 1;
  }
  const descriptors = domains.reduce((sum, domain) => sum + countDescriptors(domain.descriptors), 0);
  process.stdout.write(`OK: ${domains.length} domains, ${descriptors} descriptors\n`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
