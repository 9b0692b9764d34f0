// What tracing costs a decision: decisions/s of the same calls with no OpenTelemetry SDK, with an
// SDK whose spans are exported (BatchSpanProcessor to an exporter that drops them), and with an SDK
// that samples nothing; optionally against another build (say main's, before tracing existed).
//
//   npm run build && flock /tmp/tollgate-bench.lock node bench/tracing-overhead.js [--base /path/to/other/dist] [--rounds 9] [--duration 2000]
//
// Rates are decisions per second of the process's own CPU time (user + system), not of wall time:
// on a shared machine wall time also counts the time other processes held the CPU.
//
// Each measurement runs in a fresh child process (a fork of this file with `--child <json>`); the
// rounds are interleaved (every subject once per round, the order rotating), and the median of the
// rounds is reported, with ratios to the build without tracing (the base, else this build, no SDK).
//
// Measured this way, two runs of the same build differ by under 1% (median of 9 rounds). Both builds
// in one process, alternating, was tried and dropped: the copy loaded second ran up to 18% slower
// than the first even when both were the same build.
//
// Scenarios: `limitSync` (memory store, one hot key, a token bucket that admits everything: the
// hot path) and `check` (`decideCheck` of one descriptor against rules on the memory store, as the
// decision service calls it). Calls are issued in batches of 1,000, each batch in its own turn of
// the event loop (a setImmediate between batches), as requests arrive.
import { fork } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { setImmediate as nextTurn } from 'node:timers/promises';

const SCRIPT = fileURLToPath(import.meta.url);
const ROOT = dirname(dirname(SCRIPT));
const BATCH = 1_000;
const RULES = 'domain: api\ndescriptors:\n  - key: user\n    rate_limit: { unit: second, requests_per_unit: 1000000000 }\n';
const POLICY = { algorithm: 'token-bucket', limit: 1_000_000_000, window: '1s' };
const SCENARIOS = ['limitSync', 'check'];

/** Registers an SDK before Tollgate is imported, as `node --import` preloading does. */
async function installSdk(sampled) {
  const { context, trace } = await import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
  const { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, TracerProvider } = await import('@opentelemetry/sdk-trace');
  let exported = 0;
  const dropping = {
    export(spans, done) {
      exported += spans.length;
      done({ code: 0 });
    },
    shutdown: async () => undefined,
  };
  const provider = new TracerProvider({
    sampler: sampled ? new AlwaysOnSampler() : new AlwaysOffSampler(),
    spanProcessors: [new BatchSpanProcessor({ exporter: dropping, maxQueueSize: 65_536, maxExportBatchSize: 4_096, scheduledDelayMillis: 200 })],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  return { provider, exported: () => exported };
}

/** One batch of `scenario`'s calls on a new limiter of the build in `dist`. */
async function makeBatch(scenario, dist) {
  const { createLimiter } = await import(pathToFileURL(join(dist, 'index.js')).href);
  // tollgate/rules (dist/rules/index.js); a --base build older than it exports both from index.js.
  const load = (path) => import(pathToFileURL(join(dist, path)).href);
  const { compileRules, parseRules } = await load('rules/index.js').catch(() => load('index.js'));
  const limiter = createLimiter({ rules: compileRules(parseRules(RULES, 'bench.yaml')) });
  const request = { domain: 'api', descriptors: [{ entries: [{ key: 'user', value: 'u42' }] }] };
  return scenario === 'limitSync'
    ? () => {
        for (let i = 0; i < BATCH; i++) if (!limiter.limitSync('user:42', POLICY).allowed) throw new Error('denied');
      }
    : () => {
        for (let i = 0; i < BATCH; i++) if (limiter.decideCheck(request).overallCode !== 'OK') throw new Error('denied');
      };
}

async function child({ scenario, dist, sdk, durationMs }) {
  const tracing = sdk === 'none' ? undefined : await installSdk(sdk === 'sampled');
  const batch = await makeBatch(scenario, dist);
  const warmUntil = performance.now() + 500;
  while (performance.now() < warmUntil) {
    batch();
    await nextTurn();
  }
  let decisions = 0;
  const start = performance.now();
  const cpu = process.cpuUsage();
  while (performance.now() - start < durationMs) {
    batch();
    decisions += BATCH;
    await nextTurn();
  }
  const perSecond = perCpuSecond(decisions, cpu);
  if (tracing !== undefined) await tracing.provider.forceFlush();
  process.send({ perSecond, exported: tracing?.exported() ?? 0 });
}

/**
 * Decisions per second of this process's CPU time since `cpu` (user + system): on a shared machine
 * wall time also counts the time other processes held the CPU; CPU time is what a decision costs.
 */
function perCpuSecond(decisions, cpu) {
  const used = process.cpuUsage(cpu);
  return decisions / ((used.user + used.system) / 1e6);
}

function measure(spec) {
  return new Promise((resolveRun, reject) => {
    const worker = fork(SCRIPT, ['--child', JSON.stringify(spec)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let answer;
    worker.on('message', (message) => (answer = message));
    worker.on('exit', (code) => (code === 0 && answer !== undefined ? resolveRun(answer) : reject(new Error(`child ${JSON.stringify(spec)} exited with ${code}`))));
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const format = (n) => Math.round(n).toLocaleString('en-US');

async function main() {
  const { values } = parseArgs({ options: { base: { type: 'string' }, rounds: { type: 'string', default: '9' }, duration: { type: 'string', default: '2000' }, child: { type: 'string' } } });
  if (values.child !== undefined) return child(JSON.parse(values.child));
  const here = join(ROOT, 'dist');
  const subjects = [
    ...(values.base === undefined ? [] : [{ label: 'base build (no tracing code)', dist: resolve(values.base), sdk: 'none' }]),
    { label: 'this build, no SDK', dist: here, sdk: 'none' },
    { label: 'this build, SDK sampling nothing', dist: here, sdk: 'unsampled' },
    { label: 'this build, SDK exporting every span', dist: here, sdk: 'sampled' },
  ];
  const rounds = Number(values.rounds);
  const durationMs = Number(values.duration);
  console.log(`${cpus().length} × ${cpus()[0]?.model}, Node ${process.version}, load average ${loadavg().map((n) => n.toFixed(1)).join(' ')}; ${rounds} rounds of ${durationMs} ms`);
  for (const scenario of SCENARIOS) {
    const runs = subjects.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < subjects.length; i++) {
        const index = (i + round) % subjects.length;
        const subject = subjects[index];
        runs[index].push((await measure({ scenario, dist: subject.dist, sdk: subject.sdk, durationMs })).perSecond);
      }
    }
    const reference = median(runs[0]);
    console.log(`\n${scenario} (decisions per CPU-second, median of ${rounds}; ratio to "${subjects[0].label}")`);
    subjects.forEach((subject, i) => {
      const perRound = runs[i].map((run) => (run / median(runs[0])).toFixed(3)).join(' ');
      console.log(`  ${subject.label.padEnd(38)} ${format(median(runs[i])).padStart(12)}  ×${(median(runs[i]) / reference).toFixed(3)}   (per round: ${perRound})`);
    });
    if (subjects[0].sdk === 'none' && values.base !== undefined) {
      const paired = runs[1].map((run, round) => run / runs[0][round]);
      console.log(`  no SDK / base, paired by round: median ×${median(paired).toFixed(3)} (${paired.map((r) => r.toFixed(3)).join(' ')})`);
    }
  }
}

await main();
