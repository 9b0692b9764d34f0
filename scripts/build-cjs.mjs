// Build step: a CommonJS copy of dist/ in dist-cjs/, for `require('tollgate')` and its subpaths
// (package.json "exports", condition "require"). Each ES module is turned into a CommonJS module on
// its own (no bundling), so every subpath shares one copy of each class within a format.
// `import.meta.url` becomes the file's own URL; `import('jose')` stays a dynamic import, which
// CommonJS supports (jose is ESM-only). Types and the files read at run time are copied as they are.
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const from = join(root, 'dist');
const to = join(root, 'dist-cjs');

rmSync(to, { recursive: true, force: true });
const banner = 'const __tollgateModuleUrl = require("node:url").pathToFileURL(__filename).href;';

function walk(folder) {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const source = join(folder, entry.name);
    const target = join(to, relative(from, source));
    if (entry.isDirectory()) {
      // The CLI is the bin's, an ES module; the library never imports it.
      if (folder !== from || entry.name !== 'cli') walk(source);
      continue;
    }
    mkdirSync(dirname(target), { recursive: true });
    if (entry.name.endsWith('.js')) {
      const { code } = transformSync(readFileSync(source, 'utf8'), {
        format: 'cjs',
        platform: 'node',
        target: 'node20',
        define: { 'import.meta.url': '__tollgateModuleUrl' },
        banner,
        sourcefile: relative(root, source),
      });
      writeFileSync(target, code);
    } else if (!entry.name.endsWith('.js') && !entry.name.endsWith('.map')) {
      cpSync(source, target);
    }
  }
}

walk(from);
// Inside dist-cjs, .js and .d.ts files are CommonJS (the package itself is "type": "module").
writeFileSync(join(to, 'package.json'), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
