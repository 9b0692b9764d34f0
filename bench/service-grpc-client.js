// gRPC load generator for bench/service.js, in its own process: a closed loop of `inFlight`
// concurrent envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit calls (each worker sends
// its next call when the previous one answers), spread over `channels` HTTP/2 connections (Envoy
// also keeps one connection per worker thread). Addresses cycle over `addresses` values (10.x.y.z)
// like the wrk script, so every decision is admitted under examples/rules/per-ip.yaml.
//
//   node bench/service-grpc-client.js '{"port":8081,"protoDir":"src/service/proto","durationMs":10000}'
//
// Prints one JSON line: calls, calls/s, latency percentiles (µs, from send to answer), OK /
// OVER_LIMIT / error counts, and the CPU this process used.
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { LOADER_OPTIONS } from '../dist/service/grpc/messages.js';

const spec = {
  host: '127.0.0.1',
  inFlight: 64,
  channels: 2,
  durationMs: 10_000,
  warmupMs: 0,
  addresses: 100_000,
  addressOffset: 0,
  domain: 'per_ip',
  ...JSON.parse(process.argv[2] ?? '{}'),
};

// The service's own loader options (proto names, numbers for longs, enums by name), so both ends agree.
const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto'], { ...LOADER_OPTIONS, includeDirs: [spec.protoDir] });
const RateLimitService = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3.RateLimitService;
// A local subchannel pool per client: otherwise grpc-js shares one connection between them.
const clients = Array.from(
  { length: spec.channels },
  () => new RateLimitService(`${spec.host}:${spec.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 }),
);
await Promise.all(clients.map((client) => new Promise((resolve, reject) => client.waitForReady(Date.now() + 5_000, (error) => (error ? reject(error) : resolve())))));

let counter = spec.addressOffset;
const request = () => {
  const n = counter++ % spec.addresses;
  const value = `10.${Math.floor(n / 65536)}.${Math.floor(n / 256) % 256}.${n % 256}`;
  return { domain: spec.domain, descriptors: [{ entries: [{ key: 'remote_address', value }] }] };
};

let recording = false;
let stopped = false;
const latencies = [];
const counts = { OK: 0, OVER_LIMIT: 0, other: 0, errors: 0 };
let firstError;

async function worker(client) {
  while (!stopped) {
    const started = performance.now();
    const outcome = await new Promise((resolve) => {
      client.ShouldRateLimit(request(), { deadline: Date.now() + 10_000 }, (error, response) => resolve(error ?? response));
    });
    if (!recording) continue;
    latencies.push(performance.now() - started);
    if (outcome instanceof Error) {
      counts.errors++;
      firstError ??= `${outcome.code} ${outcome.details}`;
    } else if (outcome.overall_code === 'OK') counts.OK++;
    else if (outcome.overall_code === 'OVER_LIMIT') counts.OVER_LIMIT++;
    else counts.other++;
  }
}

const workers = Array.from({ length: spec.inFlight }, (_, i) => worker(clients[i % clients.length]));
await new Promise((resolve) => setTimeout(resolve, spec.warmupMs));
recording = true;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
await new Promise((resolve) => setTimeout(resolve, spec.durationMs));
recording = false;
const elapsedMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
stopped = true;
await Promise.all(workers);
for (const client of clients) client.close();

latencies.sort((a, b) => a - b);
const at = (p) => (latencies.length === 0 ? NaN : Math.round(latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] * 1000));
console.log(
  JSON.stringify({
    calls: latencies.length,
    perSecond: latencies.length / (elapsedMs / 1000),
    latencyUs: { p50: at(50), p75: at(75), p90: at(90), p99: at(99), max: at(100) },
    counts,
    firstError,
    clientCores: (cpu.user + cpu.system) / 1000 / elapsedMs,
    elapsedMs,
  }),
);
