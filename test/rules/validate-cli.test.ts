/**
 * `tollgate validate PATH` through the built bin under plain `node` (`npm test` builds dist/
 * first): OK with counts and exit 0, every error on stderr and exit 1, exit 2 on misuse.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { bin: Record<string, string> };
const fixtures = 'test/rules/fixtures';

function tollgate(...args: string[]) {
  return spawnSync(process.execPath, [pkg.bin.tollgate!, ...args], { cwd: root, encoding: 'utf8' });
}

describe('tollgate validate', () => {
  it('prints the domain and descriptor counts of a valid directory and exits 0', () => {
    const result = tollgate('validate', `${fixtures}/valid`);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('OK: 6 domains, 21 descriptors\n');
    expect(result.status).toBe(0);
  });

  it('reads *.json files of a directory, as loadRules does', () => {
    const result = tollgate('validate', `${fixtures}/dir-json`);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe('OK: 2 domains, 3 descriptors\n');
    expect(result.status).toBe(0);
  });

  it('validates a single file', () => {
    const result = tollgate('validate', `${fixtures}/valid/envoy-nested-defaults.yaml`);
    expect(result.stdout).toBe('OK: 1 domain, 4 descriptors\n');
    expect(result.status).toBe(0);
  });

  it('prints every error of a file as file:line:col: path: message and exits 1', () => {
    const result = tollgate('validate', `${fixtures}/invalid/several-errors.yaml`);
    const file = `${fixtures}/invalid/several-errors.yaml`;
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      [
        `${file}:5:13: descriptors[0].rate_limit.unit: unit "fortnight" is not one of second, minute, hour, day, week, month, year`,
        `${file}:8:18: descriptors[1].shadow_mode: shadow_mode must be true or false, got "maybe"`,
        `${file}:11:26: descriptors[1].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, got -1`,
        '',
      ].join('\n'),
    );
    expect(result.status).toBe(1);
  });

  it('collects errors across the files of a directory, domains defined twice included', () => {
    const dir = `${fixtures}/dir-errors`;
    const result = tollgate('validate', dir);
    expect(result.stderr.split('\n')).toEqual([
      `${dir}/b-broken.yaml:4:25: descriptors[0].rate_limit.unit: unit "seconds" is not one of second, minute, hour, day, week, month, year; did you mean "second"?`,
      `${dir}/b-broken.yaml:5:10: descriptors[1].key: key must not be empty: write the descriptor key to match (key: remote_address)`,
      `${dir}/c-again.yaml:1:9: domain: domain "alpha" is already defined at ${dir}/a-good.yaml:1:9; define each domain once`,
      '',
    ]);
    expect(result.status).toBe(1);
  });

  it('reports a missing path as an error (exit 1)', () => {
    const result = tollgate('validate', `${fixtures}/no-such-dir`);
    expect(result.stderr).toBe(`${fixtures}/no-such-dir:1:1: cannot read rules: no such file or directory\n`);
    expect(result.status).toBe(1);
  });

  it.each([
    ['no PATH', ['validate']],
    ['two PATHs', ['validate', `${fixtures}/valid`, `${fixtures}/dir-ok`]],
  ])('exits 2 with usage on %s', (_case, args) => {
    const result = tollgate(...args);
    expect(result.stderr).toBe('tollgate validate: takes one PATH (a rules file or a directory of *.yaml/*.json files)\nsee tollgate validate --help\n');
    expect(result.status).toBe(2);
  });

  it('exits 2 on an unknown flag', () => {
    const result = tollgate('validate', '--strict', `${fixtures}/valid`);
    expect(result.stderr).toBe('tollgate validate: unknown flag --strict\nsee tollgate validate --help\n');
    expect(result.status).toBe(2);
  });

  it('is listed in --help, next to demo', () => {
    const result = tollgate('--help');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^ {2}demo {10}/m);
    expect(result.stdout).toMatch(/^ {2}validate PATH Check a rules file/m);
  });
});
