/**
 * docs/guarantees.md: every promise names the test that proves it, as a line
 * `- Test: \`<path>\` — "<test name>"` under its entry. This checks that each named test still
 * exists under that name, so renaming or deleting a test that proves a promise turns CI red. Reads
 * files only: well under a second.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = new URL('../..', import.meta.url).pathname;
const CATALOGUE = readFileSync(join(ROOT, 'docs/guarantees.md'), 'utf8');
const NOT_PROVEN = '## Promises not yet proven';

interface Proof {
  readonly line: number;
  readonly path: string;
  readonly name: string;
}

/** Every `Test:` line of the catalogue. */
function proofs(): Proof[] {
  return CATALOGUE.split('\n').flatMap((text, index) => {
    const match = /^\s*(?:- )?Test: `([^`]+)` — "(.+)"\s*$/.exec(text);
    return match === null ? [] : [{ line: index + 1, path: match[1]!, name: match[2]!.replace(/\\"/g, '"') }];
  });
}

/** Placeholders a parameterised test name may hold: vitest's `%s`-style and `$name`, and `${…}`. */
const PLACEHOLDER = /\$\{[^}]*\}|%[sdifjo#%]|\$[A-Za-z_][\w.]*/g;

/** The fewest characters besides placeholders a parameterised test name has. */
const MIN_TEMPLATE_TEXT = 15;

/** The quoted strings of a source file that hold a placeholder, as patterns matching their fillings. */
function templates(source: string): RegExp[] {
  const quoted = source.match(/'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`/g) ?? [];
  return quoted
    .map((literal) => unescape(literal.slice(1, -1)))
    // A template that is mostly placeholders (`${name}-${id}`) is a key, not a test name: it would match anything.
    .filter((text) => text.search(PLACEHOLDER) >= 0 && text.replace(PLACEHOLDER, '').length >= MIN_TEMPLATE_TEXT)
    .map((text) => {
      const parts = text.split(PLACEHOLDER).map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      return new RegExp(`^${parts.join('.+?')}$`, 's');
    });
}

/** A JS or JSON string literal's body as text (the escapes test names use). */
function unescape(body: string): string {
  return body.replace(/\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|.)/g, (_all, escaped: string) => {
    if (escaped.startsWith('u')) return String.fromCodePoint(parseInt(escaped.replace(/[u{}]/g, ''), 16));
    return ({ n: '\n', t: '\t' } as Record<string, string>)[escaped] ?? escaped;
  });
}

/** Each named file's text and its templates, read once. */
const files = new Map<string, { source: string; templates: RegExp[] }>();

/** Whether the file declares a test of this name: literally (as written in any quoting), or as a template it fills. */
function declares(file: string, name: string): boolean {
  let read = files.get(file);
  if (read === undefined) {
    const source = readFileSync(file, 'utf8');
    read = { source, templates: templates(source) };
    files.set(file, read);
  }
  const { source } = read;
  const written = [name, name.replace(/'/g, "\\'"), name.replace(/"/g, '\\"'), JSON.stringify(name).slice(1, -1)];
  return written.some((form) => source.includes(form)) || read.templates.some((pattern) => pattern.test(name));
}

describe('docs/guarantees.md', () => {
  const all = proofs();

  it('names a test for every guarantee, and none under "Promises not yet proven"', () => {
    const notProvenAt = CATALOGUE.slice(0, CATALOGUE.indexOf(NOT_PROVEN)).split('\n').length;
    expect(CATALOGUE).toContain(NOT_PROVEN);
    expect(all.filter((proof) => proof.line > notProvenAt)).toEqual([]);
    const entries = CATALOGUE.slice(0, CATALOGUE.indexOf(NOT_PROVEN)).split(/\n- \*\*(?=G-[A-Z]+-\d+\*\*)/).slice(1);
    expect(entries.length).toBeGreaterThan(50);
    const ids = entries.map((entry) => /^(G-[A-Z]+-\d+)/.exec(entry)![1]!);
    expect(new Set(ids).size, 'IDs are unique').toBe(ids.length);
    for (const entry of entries) expect(entry, entry.slice(0, 80)).toMatch(/\n\s*- Test: `/);
    // A proof line that does not parse would be skipped silently by the next test.
    const proofLines = CATALOGUE.split('\n').filter((text) => /^\s*- Test:/.test(text));
    expect(proofLines.length).toBe(all.length);
  });

  it('every test it names exists under that name', () => {
    const missing = all.flatMap(({ line, path, name }) => {
      const file = join(ROOT, path);
      if (!existsSync(file)) return [`line ${line}: ${path} does not exist`];
      return declares(file, name) ? [] : [`line ${line}: ${path} has no test named "${name}"`];
    });
    expect(missing).toEqual([]);
  });

  it('is linked from the README\'s Guarantees section', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Guarantees'), readme.indexOf('\n## ', readme.indexOf('## Guarantees') + 1));
    expect(section).toContain('(docs/guarantees.md)');
  });
});
