// The load generator of bench/many-nodes.js, run in its own process: a lean HTTP/1.1 client on raw
// sockets (no http.Agent, no parser object), one request in flight per keep-alive connection,
// connections spread evenly over the service nodes. Each request POSTs envoy's RateLimitRequest to
// /v1/check with the value cycling over `values` (so Redis sees many keys).
//
//   node bench/many-nodes-client.js '{"ports":[P1,P2],"concurrency":64,"warmupS":1,"durationS":5,"values":100000,"domain":"bench","key":"user"}'
//
// Prints "timed-start" when the warm-up ends and "timed-end" when the timed window ends (the parent
// reads its CPU and Redis counters there), then one JSON line: requests, statuses, degraded answers,
// errors and latency percentiles (µs) of the requests sent and answered inside the timed window,
// and this process's CPU seconds over that window.
import { connect } from 'node:net';
import { performance } from 'node:perf_hooks';

const spec = JSON.parse(process.argv[2]);
const { ports, concurrency, warmupS, durationS, values, domain, key } = spec;

const HEADER_END = Buffer.from('\r\n\r\n');
let phase = 'warmup';
let latencies = new Float64Array(1 << 16);
let count = 0;
const statuses = {};
let degraded = 0;
let errors = 0;
let counter = Math.floor(Math.random() * values);

function record(status, isDegraded, micros) {
  if (phase !== 'timed') return;
  if (count === latencies.length) {
    const grown = new Float64Array(latencies.length * 2);
    grown.set(latencies);
    latencies = grown;
  }
  latencies[count++] = micros;
  statuses[status] = (statuses[status] ?? 0) + 1;
  if (isDegraded) degraded += 1;
}

function request(port) {
  const body = `{"domain":"${domain}","descriptors":[{"entries":[{"key":"${key}","value":"v${counter++ % values}"}]}]}`;
  return `POST /v1/check HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
}

/** One keep-alive connection sending the next request as soon as the answer to the last is read. */
function connection(port) {
  let socket;
  let buffered = Buffer.alloc(0);
  let sentAt = 0;
  let sentPhase = phase;
  const send = () => {
    if (phase === 'done') {
      socket.end();
      return;
    }
    sentAt = performance.now();
    sentPhase = phase;
    socket.write(request(port));
  };
  const open = () => {
    const own = connect(port, '127.0.0.1');
    socket = own;
    buffered = Buffer.alloc(0);
    let replaced = false;
    // A closed connection (the server's `connection: close`, or an error) is replaced by a new one.
    const reopen = () => {
      if (replaced || phase === 'done') return;
      replaced = true;
      own.destroy();
      setImmediate(open);
    };
    own.setNoDelay(true);
    own.on('connect', send);
    own.on('data', (chunk) => {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf(HEADER_END);
      if (end === -1) return;
      const head = buffered.toString('latin1', 0, end);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      const status = Number(head.slice(9, 12));
      if (sentPhase === phase) record(status, /\r\ntollgate-degraded:/i.test(head), (performance.now() - sentAt) * 1000);
      buffered = buffered.subarray(end + 4 + length);
      if (/\r\nconnection: *close/i.test(head)) reopen();
      else send();
    });
    own.on('error', () => {
      if (phase === 'timed') errors += 1;
    });
    own.on('close', reopen);
  };
  open();
}

for (let i = 0; i < concurrency; i++) connection(ports[i % ports.length]);

setTimeout(() => {
  phase = 'timed';
  const cpu = process.cpuUsage();
  const started = performance.now();
  process.stdout.write('timed-start\n');
  setTimeout(() => {
    phase = 'done';
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    process.stdout.write('timed-end\n');
    const sorted = latencies.subarray(0, count).sort();
    const at = (q) => (count === 0 ? NaN : sorted[Math.min(count - 1, Math.floor(q * count))]);
    const result = {
      requests: count,
      seconds,
      perSecond: count / seconds,
      statuses,
      degraded,
      errors,
      latencyUs: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: at(1) },
      clientCpuSeconds: (used.user + used.system) / 1e6,
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
    setTimeout(() => process.exit(0), 200).unref();
  }, durationS * 1000);
}, warmupS * 1000);
