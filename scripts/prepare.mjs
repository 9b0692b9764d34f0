// npm runs `prepare` on a git install (`npm install git+https://...`) and before `npm pack`:
// dist/ is not in git, so build it when it is missing. An existing dist/ is left alone (npm test
// and npm start rebuild anyway), so installs in a built checkout stay fast.
import { execSync } from 'node:child_process';
import { existsSync } from 'node:fs';

if (!existsSync(new URL('../dist/cli.js', import.meta.url))) {
  execSync('npm run build', { cwd: new URL('..', import.meta.url), stdio: 'inherit' });
}
