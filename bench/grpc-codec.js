// The two messages of every ShouldRateLimit call, in one process: protobufjs (decode + toObject,
// fromObject + encode, then framed: what the node:http2 server did) against the hand codec
// (src/service/grpc/rate-limit-wire.ts: decode, encode straight into a frame). CPU µs per call
// (process.cpuUsage over the loop), medians of the repeats, alternating.
//
//   npm run build && node bench/grpc-codec.js [--repeats 5] [--calls 300000]
//
// The request is bench/service-grpc.js's `admitted` body; the response the one Tollgate answers it with.
import { loadSync } from '@grpc/proto-loader';
import { codec, loadGrpcCodecs, loadProtoRoot } from '../dist/service/grpc/codec.js';
import { frame } from '../dist/service/grpc/framing.js';
import { LOADER_OPTIONS } from '../dist/service/grpc/messages.js';

const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(`--${name}`) ? Number(argv[argv.indexOf(`--${name}`) + 1]) : fallback);
const REPEATS = option('repeats', 5);
const CALLS = option('calls', 300_000);

const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto'], LOADER_OPTIONS);
const method = definition['envoy.service.ratelimit.v3.RateLimitService'].ShouldRateLimit;
const request = method.requestSerialize({ domain: 'bench', descriptors: [{ entries: [{ key: 'client', value: 'load' }] }], hits_addend: 0 });
const response = {
  overall_code: 'OK',
  statuses: [{ code: 'OK', current_limit: { requests_per_unit: 4294967295, unit: 'SECOND' }, limit_remaining: 4294967294, duration_until_reset: { seconds: 1, nanos: 0 } }],
  response_headers_to_add: [],
};

const protobufjs = codec(loadProtoRoot(), 'envoy.service.ratelimit.v3.RateLimitRequest', 'envoy.service.ratelimit.v3.RateLimitResponse');
const hand = loadGrpcCodecs().rateLimit;
const subjects = {
  protobufjs: () => {
    protobufjs.decode(request);
    return frame(protobufjs.encode(response));
  },
  hand: () => {
    hand.decode(request);
    return hand.encodeFramed(response);
  },
};
if (subjects.protobufjs().toString('hex') !== subjects.hand().toString('hex')) throw new Error('the two codecs answer different bytes');

function usPerCall(run) {
  for (let i = 0; i < 50_000; i++) run();
  const before = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / CALLS;
}

const samples = { protobufjs: [], hand: [] };
for (let repeat = 0; repeat < REPEATS; repeat++) {
  for (const name of repeat % 2 ? ['hand', 'protobufjs'] : ['protobufjs', 'hand']) samples[name].push(usPerCall(subjects[name]));
}
const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
console.log('| codec | µs CPU per call (decode + encode + frame), the repeats | median | × protobufjs |');
console.log('|---|---:|---:|---:|');
for (const name of ['protobufjs', 'hand']) {
  console.log(`| ${name} | ${samples[name].map((v) => v.toFixed(2)).join(' / ')} | ${median(samples[name]).toFixed(2)} | ${(median(samples[name]) / median(samples.protobufjs)).toFixed(2)} |`);
}
