/**
 * docs/simulate.md: every `<!-- example: PATH -->` block is that file of examples/simulate/,
 * verbatim, and every `<!-- output: ... -->` block is what the command prints: `simulate ARGS` run
 * in this process (as `tollgate simulate ARGS`), `node FILE` as a real process through the
 * package's `tollgate/simulate` export (`npm test` builds dist/ first).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runSimulateCommand } from '../../src/simulate/command.js';

const root = new URL('../..', import.meta.url).pathname;
const guide = readFileSync(join(root, 'docs/simulate.md'), 'utf8');
const examples = [...guide.matchAll(/<!-- example: (\S+) -->\n```\w*\n([^]*?)```\n/g)].map((match) => ({ path: match[1]!, text: match[2]! }));
const outputs = [...guide.matchAll(/<!-- output: (.+?) -->\n```text\n([^]*?)```\n/g)].map((match) => ({ call: match[1]!, text: match[2]! }));

/** `simulate ARGS [| first N lines]` in this process, from the repository root. */
async function simulateOutput(call: string): Promise<string> {
  const [command, filter] = call.split(' | ');
  const args = command!.split(' ').slice(1).map((arg) => (arg.startsWith('examples/') ? join(root, arg) : arg));
  let stdout = '';
  const status = await runSimulateCommand(args, { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => expect.fail(text) } }, '');
  expect(status).toBe(0);
  stdout = stdout.replaceAll(`${root}`, '');
  const first = filter === undefined ? undefined : /^first (\d+) lines$/.exec(filter);
  return first === undefined || first === null ? stdout : `${stdout.split('\n').slice(0, Number(first[1])).join('\n')}\n`;
}

describe('docs/simulate.md', () => {
  it('has its examples and outputs marked', () => {
    expect(examples.map((example) => example.path)).toEqual(['examples/simulate/rules.yaml', 'examples/simulate/map.yaml', 'examples/simulate/api.mjs']);
    expect(outputs).toHaveLength(3);
  });

  it.each(examples)('shows $path as it is', ({ path, text }) => {
    expect(text).toBe(readFileSync(join(root, path), 'utf8'));
  });

  it.each(outputs.filter((output) => output.call.startsWith('simulate ')))('prints what `tollgate $call` prints', async ({ call, text }) => {
    expect(await simulateOutput(call)).toBe(text);
  });

  it('prints what the code example prints, through the tollgate/simulate export', () => {
    const { call, text } = outputs.find((output) => output.call.startsWith('node '))!;
    const result = spawnSync(process.execPath, call.split(' ').slice(1), { cwd: root, encoding: 'utf8', timeout: 30_000 });
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(text);
  });
});
