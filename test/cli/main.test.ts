/**
 * src/cli/main.ts loads a command's code only when that command runs: its static imports are the
 * light modules below (the names, the global help, the error types), every command's module comes
 * through `import()`. `tollgate --version` then costs a bare Node start, not the whole service.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const source = readFileSync(new URL('../../src/cli/main.ts', import.meta.url), 'utf8');
const LIGHT = ['node:fs', 'node:util', './admin/commands.js', './admin/output.js', './global-usage.js', '../errors.js', '../rules/parse/suggest.js'];

describe('the tollgate entry point', () => {
  it('imports statically only light modules; each command\'s module is imported when the command runs', () => {
    const staticImports = [...source.matchAll(/^import .* from '([^']+)';$/gm)].map((match) => match[1]);
    expect(staticImports.filter((name) => !LIGHT.includes(name!))).toEqual([]);
    const dynamic = new Set([...source.matchAll(/await import\('([^']+)'\)/g)].map((match) => match[1]));
    for (const module of ['./admin/index.js', './health.js', './demo.js', './command-help.js', '../service/index.js', '../gateway/server.js', './replicate.js', '../simulate/command.js', '../rules/files.js']) expect(dynamic, module).toContain(module);
  });
});
