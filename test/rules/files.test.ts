/**
 * Rules files on disk: which files of a directory are read (and in what order), the size limit
 * checked before reading, and domains defined in two files.
 */
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RulesError } from '../../src/errors.js';
import { checkRuleFiles, loadDomainConfigs, readRuleSources } from '../../src/rules/files.js';
import { loadRules } from '../../src/rules/load.js';

const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));
const dirOk = join(fixtures, 'dir-ok');
const dirDuplicate = join(fixtures, 'dir-duplicate');
const dirErrors = join(fixtures, 'dir-errors');
const dirJson = join(fixtures, 'dir-json');

async function rejection(promise: Promise<unknown>): Promise<RulesError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(RulesError);
  return error as RulesError;
}

describe('readRuleSources', () => {
  it('reads *.yaml and *.yml files of a directory, sorted, skipping dotfiles, other files and subdirectories', async () => {
    const sources = await readRuleSources(dirOk);
    expect(sources.map((source) => source.source)).toEqual([join(dirOk, 'a-login.yaml'), join(dirOk, 'b-search.yml')]);
    expect(sources[0]!.text).toMatch(/^domain: login\n/);
  });

  it('reads a single file', async () => {
    const file = join(dirOk, 'b-search.yml');
    expect(await readRuleSources(file)).toEqual([{ source: file, text: expect.stringMatching(/^domain: search\n/) as unknown }]);
  });

  it('refuses a missing path as a rules error', async () => {
    const missing = join(fixtures, 'no-such-rules');
    expect((await rejection(readRuleSources(missing))).message).toBe(`${missing}:1:1: cannot read rules: no such file or directory`);
  });

  describe('size limit', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), 'tollgate-rules-'));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it('refuses a file of 1 MiB + 1 byte', async () => {
      const file = join(dir, 'big.yaml');
      await writeFile(file, `domain: big\n#${'x'.repeat(1_048_576 - 13)}\n`);
      expect((await rejection(readRuleSources(file))).message).toBe(
        `${file}:1:1: 1048577 bytes is over the limit of 1048576 bytes (1 MiB) for one rules source; split the domains across several files`,
      );
    });

    it('checks the size before reading: a 4 GiB (sparse) file is refused, not loaded', async () => {
      const huge = join(dir, 'huge.yaml');
      await writeFile(huge, '');
      await truncate(huge, 4 * 1024 ** 3);
      const error = await rejection(readRuleSources(huge));
      expect(error.message).toBe(`${huge}:1:1: 4294967296 bytes is over the limit of 1048576 bytes (1 MiB) for one rules source; split the domains across several files`);
      await rm(huge);
    });
  });
});

describe('loadDomainConfigs', () => {
  it('loads every domain of a directory', async () => {
    const domains = await loadDomainConfigs(dirOk);
    expect(domains.map((domain) => [domain.domain, domain.source])).toEqual([
      ['login', join(dirOk, 'a-login.yaml')],
      ['search', join(dirOk, 'b-search.yml')],
    ]);
  });

  it('refuses a domain defined in two files, naming both files and lines', async () => {
    const error = await rejection(loadDomainConfigs(dirDuplicate));
    expect(error.message).toBe(
      `${join(dirDuplicate, 'two.yaml')}:4:9: domain: domain "checkout" is already defined at ${join(dirDuplicate, 'one.yaml')}:2:9; define each domain once`,
    );
  });

  it('rejects with the first error of the first broken file', async () => {
    const error = await rejection(loadDomainConfigs(dirErrors));
    expect(error.message).toBe(
      `${join(dirErrors, 'b-broken.yaml')}:4:25: descriptors[0].rate_limit.unit: unit "seconds" is not one of second, minute, hour, day, week, month, year; did you mean "second"?`,
    );
  });
});

describe('checkRuleFiles', () => {
  it('collects every error of every file, and domains defined twice across files', async () => {
    const { domains, errors } = await checkRuleFiles(dirErrors);
    expect(domains).toEqual([]);
    expect(errors.map((error) => error.message)).toEqual([
      `${join(dirErrors, 'b-broken.yaml')}:4:25: descriptors[0].rate_limit.unit: unit "seconds" is not one of second, minute, hour, day, week, month, year; did you mean "second"?`,
      `${join(dirErrors, 'b-broken.yaml')}:5:10: descriptors[1].key: key must not be empty: write the descriptor key to match (key: remote_address)`,
      `${join(dirErrors, 'c-again.yaml')}:1:9: domain: domain "alpha" is already defined at ${join(dirErrors, 'a-good.yaml')}:1:9; define each domain once`,
    ]);
  });
});

describe('*.json files in a rules directory', () => {
  it('are read by loadRules and by checkRuleFiles (tollgate validate) alike, in name order with the YAML files', async () => {
    expect((await readRuleSources(dirJson)).map((source) => source.source)).toEqual([join(dirJson, 'a.yaml'), join(dirJson, 'b.json')]);
    expect((await loadRules(dirJson)).domainNames()).toEqual(['from_json', 'from_yaml']);
    const { domains, errors } = await checkRuleFiles(dirJson);
    expect(errors).toEqual([]);
    expect(domains.map((domain) => domain.domain)).toEqual(['from_yaml', 'from_json']);
  });
});
