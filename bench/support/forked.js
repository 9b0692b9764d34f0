// Benchmarks that measure each subject in a fresh forked process of their own script: the parent
// forks `<script> --child <spec>` and reads the child's last line of stdout as its result.
import { fork } from 'node:child_process';
import { killAllNow } from './children.js';

/** Runs `script` as a child measuring `spec`; resolves to the JSON it printed last. */
export function runForked(script, spec) {
  return new Promise((resolve, reject) => {
    const child = fork(script, ['--child', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`${JSON.stringify(spec)} exited ${code}`))));
  });
}

/** The middle value of `values` (the upper middle for an even count). */
export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The entry point: as a child, prints what `measure(spec)` resolves to; else runs `main`, killing every child it started on failure or Ctrl-C. */
export function forkedEntry(measure, main) {
  if (process.argv[2] === '--child') {
    measure(JSON.parse(process.argv[3])).then(
      (result) => {
        process.stdout.write(`${JSON.stringify(result)}\n`);
        process.exit(0);
      },
      (error) => {
        console.error(error);
        process.exit(1);
      },
    );
    return;
  }
  process.on('SIGINT', () => {
    killAllNow();
    process.exit(130);
  });
  main().catch((error) => {
    console.error(error);
    killAllNow();
    process.exit(1);
  });
}
