/**
 * BENCHMARKS.md is linked by section from the README and docs/: every `BENCHMARKS.md#anchor` link
 * there, and every `#anchor` or `docs/PAGE.md#anchor` link inside BENCHMARKS.md, must land on a
 * heading, as GitHub names headings (lowercase, punctuation dropped, spaces to '-', repeats -1, -2).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../..', import.meta.url).pathname;
const read = (page: string): string => readFileSync(join(root, page), 'utf8');

/** The anchors GitHub gives a page's headings (code fences skipped). */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let inFence = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) inFence = !inFence;
    const heading = inFence ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const text = heading[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '');
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, '').replace(/ /g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

const pages = ['README.md', ...readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

describe('links into BENCHMARKS.md', () => {
  const benchmarks = headingAnchors(read('BENCHMARKS.md'));

  it('names GitHub anchors as GitHub does', () => {
    expect([...headingAnchors('# Benchmarks\n## Gateway vs nginx\n### Run\n```\n# not a heading\n```\n### Run\n## A 1M checks/s fleet\n## `limitSync`, in the library')]).toEqual([
      'benchmarks',
      'gateway-vs-nginx',
      'run',
      'run-1',
      'a-1m-checkss-fleet',
      'limitsync-in-the-library',
    ]);
  });

  it.each(pages)('%s: every BENCHMARKS.md#anchor is a heading of BENCHMARKS.md', (page) => {
    for (const match of read(page).matchAll(/BENCHMARKS\.md#([^)\s"'`]+)/g)) expect(benchmarks, `${page} → #${match[1]}`).toContain(match[1]);
  });

  it('BENCHMARKS.md: every link to one of its sections, or to a section of docs/, lands on a heading', () => {
    const text = read('BENCHMARKS.md');
    const links = [...text.matchAll(/\]\(((?:docs\/[\w-]+\.md)?)#([^)]+)\)/g)];
    expect(links.length).toBeGreaterThan(20);
    for (const [, page, anchor] of links) {
      const anchors = page ? headingAnchors(read(page!)) : benchmarks;
      expect(anchors, `${page || 'BENCHMARKS.md'}#${anchor}`).toContain(anchor);
    }
  });
});
