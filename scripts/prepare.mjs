// npm runs `prepack` before `npm pack` / `npm publish` and on a git install (`npm install git+https://...`):
// dist/ is not in git, so build it when it is missing. An existing dist/ is left alone (npm test
// and npm start rebuild anyway), so installs in a built checkout stay fast.
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const root = new URL('..', import.meta.url);
if (!existsSync(new URL('dist/cli/main.js', root)) || !existsSync(new URL('dist-cjs/index.js', root))) {
  if (!existsSync(new URL('node_modules/typescript/package.json', root))) {
    // `npm ci --omit=dev` in a checkout without dist/: say what to do rather than fail inside tsc.
    console.error('tollgate: dist/ is missing and TypeScript is not installed: run `npm ci && npm run build` first, or install with --ignore-scripts');
    process.exit(1);
  }
  execSync('npm run build', { cwd: root, stdio: 'inherit' });
}
