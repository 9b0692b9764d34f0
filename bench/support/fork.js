// One measurement in a fresh forked process: the bench script run again with `--child SPEC`, its
// answer the last line it prints as JSON. What the ledger benches share (a clean heap per sample).
import { fork } from 'node:child_process';

export function runChild(script, spec) {
  return new Promise((resolve, reject) => {
    const child = fork(script, ['--child', JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1))) : reject(new Error(`${spec.subject} exited ${code}`))));
  });
}

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The bench's entry: `measure(spec)` in a child (its result printed as JSON), else `main()`; exits 1 on error. */
export function benchEntry(measure, main, killAllNow) {
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
