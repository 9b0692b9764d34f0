/**
 * The gRPC side of `tollgate serve`, end to end over loopback with real gRPC clients (no mocks):
 * envoy's ShouldRateLimit (decisions, statuses, headers, hits), bad requests (INVALID_ARGUMENT,
 * never a crash), the message size cap, grpc.health.v1, envoy's field numbers checked byte by byte,
 * the same answers over HTTP /json and gRPC, a store outage (UNAVAILABLE), graceful close, and the
 * real CLI in a child process; each against both gRPC servers (`--grpc-server http2` and `grpc-js`).
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CheckEvent, RejectedEvent } from '../../../src/service/context.js';
import { MAX_MESSAGE_BYTES, RATE_LIMIT_SERVICE, SHUTDOWN_GRACE_MS } from '../../../src/service/grpc/listener.js';
import { GRPC_SERVERS, resolveServiceOptions } from '../../../src/service/options.js';
import { startService, type RunningService, type ServiceHooks } from '../../../src/service/server.js';
import {
  encodeFields,
  fieldValues,
  grpcFailure,
  rateLimitClient,
  readFields,
  type RateLimitClient,
  type RateLimitRequestMessage,
  type RateLimitResponseMessage,
} from '../../support/grpc-client.js';
import { cliAsync, startRedis } from '../../support/redis.js';

// Every test runs against both gRPC servers: node:http2 (the default) and grpc-js.
describe.each(GRPC_SERVERS)('--grpc-server %s', (grpcServer) => {
  const start = (flags: Record<string, string> = {}, hooks: ServiceHooks = {}): Promise<RunningService> =>
    startService(resolveServiceOptions({ port: '0', 'grpc-port': '0', 'admin-port': '0', config: 'examples/rules', 'log-level': 'silent', host: '127.0.0.1', 'response-headers': 'full', 'grpc-server': grpcServer, ...flags }, {}), undefined, hooks);

  const entries = (pairs: Record<string, string>) => Object.entries(pairs).map(([key, value]) => ({ key, value }));
  const login = (user: string): RateLimitRequestMessage => ({ domain: 'classic', descriptors: [{ entries: entries({ action: 'login', user }) }] });
  const headerMap = (response: RateLimitResponseMessage): Record<string, string> =>
    Object.fromEntries(response.response_headers_to_add.map((header) => [header.key, header.value]));

  describe('gRPC ShouldRateLimit (in-process service, memory store)', () => {
    let service: RunningService;
    let client: RateLimitClient;
    const checks: CheckEvent[] = [];
    const rejected: RejectedEvent[] = [];

    beforeAll(async () => {
      service = await start();
      expect(service.grpcPort).toBeGreaterThan(0);
      service.context.events.on('check', (event) => checks.push(event));
      service.context.events.on('rejected', (event) => rejected.push(event));
      client = rateLimitClient(service.grpcPort!);
    });

    afterAll(async () => {
      client.close();
      await service.close();
    });

    it('the login rule: 5 OK with remaining 4..0, then OVER_LIMIT with Retry-After', async () => {
      for (let i = 0; i < 5; i++) {
        const ok = await client.shouldRateLimit(login('alice'));
        expect(ok.overall_code).toBe('OK');
        expect(ok.statuses).toHaveLength(1);
        expect(ok.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 5, unit: 'MINUTE' }, limit_remaining: 4 - i });
        expect(headerMap(ok)).toMatchObject({ 'x-ratelimit-limit': '5', 'x-ratelimit-remaining': String(4 - i) });
        expect(headerMap(ok)['ratelimit-policy']).toMatch(/^"classic\.action=login\.user";q=5;w=60;pk=:[A-Za-z0-9+/]{16}:$/);
        expect(headerMap(ok)['retry-after']).toBeUndefined();
      }
      const denied = await client.shouldRateLimit(login('alice'));
      expect(denied.overall_code).toBe('OVER_LIMIT');
      expect(denied.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 5, unit: 'MINUTE' }, limit_remaining: 0 });
      const reset = denied.statuses[0]!.duration_until_reset!;
      expect(reset.seconds).toBeGreaterThan(0);
      expect(reset.seconds).toBeLessThanOrEqual(60);
      expect(reset.nanos).toBe(0);
      const headers = headerMap(denied);
      expect(headers['x-ratelimit-remaining']).toBe('0');
      expect(Number(headers['retry-after'])).toBeGreaterThan(0);
      expect(headers['x-ratelimit-retry-after']).toBe(headers['retry-after']);
      expect(headers.ratelimit).toMatch(/^"classic\.action=login\.user";r=0;t=\d+;pk=:[A-Za-z0-9+/]{16}:$/);
      // Another user has their own counter.
      expect((await client.shouldRateLimit(login('bob'))).overall_code).toBe('OK');
    });

    it('is exact under concurrency: 40 parallel calls for one user, exactly 5 admitted', async () => {
      const answers = await Promise.all(Array.from({ length: 40 }, () => client.shouldRateLimit(login('carol'))));
      expect(answers.filter((answer) => answer.overall_code === 'OK')).toHaveLength(5);
      expect(answers.filter((answer) => answer.overall_code === 'OVER_LIMIT')).toHaveLength(35);
    });

    it('one status per descriptor in request order; RateLimit-Policy lists every matched limit', async () => {
      const response = await client.shouldRateLimit({
        domain: 'hybrid',
        descriptors: [{ entries: entries({ user_id: 'u1' }) }, { entries: entries({ nothing: 'here' }) }, { entries: entries({ remote_address: '203.0.113.7' }) }],
      });
      expect(response.overall_code).toBe('OK');
      expect(response.statuses.map((status) => status.current_limit?.requests_per_unit ?? null)).toEqual([60, null, 300]);
      // No limit applied: OK, and the proto3 defaults (no current_limit, no duration).
      expect(response.statuses[1]).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null });
      expect(response.statuses[0]!.limit_remaining).toBe(59);
      expect(response.statuses[2]!.limit_remaining).toBe(299);
      const headers = headerMap(response);
      expect(quotas(headers['ratelimit-policy'])).toBe('60;w=60, 300;w=60');
      expect(headers['x-ratelimit-limit']).toBe('60'); // the tightest: fewest remaining
      expect(response.request_headers_to_add).toEqual([]);
      expect(response.raw_body.length).toBe(0);
    });

    it('an unknown domain or an unlimited key: OK with no limit and no headers', async () => {
      const unknown = await client.shouldRateLimit({ domain: 'nobody-configured-this', descriptors: [{ entries: entries({ a: 'b' }) }] });
      expect(unknown).toMatchObject({ overall_code: 'OK', statuses: [{ code: 'OK', current_limit: null }], response_headers_to_add: [] });
      const unlimited = await client.shouldRateLimit({ domain: 'per_api_key', descriptors: [{ entries: entries({ plan: 'free', api_key: 'k_internal' }) }] });
      expect(unlimited).toMatchObject({ overall_code: 'OK', statuses: [{ code: 'OK', current_limit: null }], response_headers_to_add: [] });
    });

    it('hits_addend: the request’s applies to every descriptor, a descriptor’s (UInt64Value) overrides it', async () => {
      const user = (id: string, hits?: number) => ({ entries: entries({ user_id: id }), ...(hits !== undefined ? { hits_addend: { value: hits } } : {}) });
      const first = await client.shouldRateLimit({ domain: 'per_user', descriptors: [user('h1')], hits_addend: 3 });
      expect(first.statuses[0]).toMatchObject({ current_limit: { requests_per_unit: 1000, unit: 'HOUR' }, limit_remaining: 47 }); // burst 50
      const second = await client.shouldRateLimit({ domain: 'per_user', descriptors: [user('h1', 7), user('h2')], hits_addend: 3 });
      expect(second.statuses.map((status) => status.limit_remaining)).toEqual([40, 47]);
      // More hits than the burst holds: over limit, nothing consumed.
      const over = await client.shouldRateLimit({ domain: 'per_user', descriptors: [user('h1', 41)] });
      expect(over.overall_code).toBe('OVER_LIMIT');
      expect((await client.shouldRateLimit({ domain: 'per_user', descriptors: [user('h1')] })).statuses[0]!.limit_remaining).toBe(39);
    });

    it('units as envoy names them, WEEK included; windows of several units in RateLimit-Policy', async () => {
      const week = await client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ action: 'claim_reward', device_id: 'd-1' }) }] });
      expect(week.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 5, unit: 'WEEK' });
      expect(quotas(headerMap(week)['ratelimit-policy'])).toBe('5;w=604800');
      const day = await client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ action: 'signup', remote_address: '198.51.100.1' }) }] });
      expect(day.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 10, unit: 'DAY' });
      const threeHours = await client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ action: 'post', user: 'p' }) }] });
      expect(threeHours.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 300, unit: 'HOUR' });
      expect(quotas(headerMap(threeHours)['ratelimit-policy'])).toBe('300;w=10800');
      const second = await client.shouldRateLimit({ domain: 'per_api_key', descriptors: [{ entries: entries({ plan: 'enterprise', api_key: 'k_1' }) }] });
      expect(second.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 500, unit: 'SECOND' });
    });

    it('a limit override in the descriptor is the limit, as envoy applies it: a fixed window of one unit, counted under its own key', async () => {
      const overridden = (user: string, requests_per_unit = 2, unit: string | number = 'HOUR') => ({
        domain: 'classic',
        descriptors: [{ entries: entries({ action: 'login', user }), limit: { requests_per_unit, unit } }],
      });
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push(await client.shouldRateLimit(overridden('override')));
      expect(answers.map((a) => a.overall_code)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
      expect(answers.map((a) => a.statuses[0]!.limit_remaining)).toEqual([1, 0, 0]);
      expect(answers[0]!.statuses[0]!.current_limit).toMatchObject({ requests_per_unit: 2, unit: 'HOUR' });
      expect(answers[2]!.statuses[0]!.duration_until_reset!.seconds).toBeLessThanOrEqual(3600);
      // The rule's own counter was not touched: its 5 per minute are all there.
      const plain = await client.shouldRateLimit(login('override'));
      expect(plain.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 5, unit: 'MINUTE' }, limit_remaining: 4 });
      // An override applies even where no rule matches (the domain is known), by enum number too (2: MINUTE).
      const unmatched = await client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ nothing: 'here' }), limit: { requests_per_unit: 7, unit: 2 } }] });
      expect(unmatched.statuses[0]).toMatchObject({ code: 'OK', current_limit: { requests_per_unit: 7, unit: 'MINUTE' }, limit_remaining: 6 });
      // An override of 0 denies; in an unknown domain nothing applies, as in envoy.
      expect((await client.shouldRateLimit(overridden('zero', 0))).overall_code).toBe('OVER_LIMIT');
      const elsewhere = await client.shouldRateLimit({ domain: 'unknown-domain', descriptors: [{ entries: entries({ a: 'b' }), limit: { requests_per_unit: 0, unit: 'SECOND' } }] });
      expect(elsewhere.overall_code).toBe('OK');
    });

    it.each<[string, RateLimitRequestMessage, RegExp]>([
      ['no domain', { descriptors: [{ entries: entries({ a: 'b' }) }] }, /^domain is required/],
      ['no descriptors', { domain: 'classic' }, /^descriptors must hold at least one RateLimitDescriptor/],
      ['an empty key', { domain: 'classic', descriptors: [{ entries: [{ key: '', value: 'v' }] }] }, /^descriptors\[0\]\.entries\[0\] must be \{ key: non-empty string/],
      ['an override without a unit', { domain: 'classic', descriptors: [{ entries: entries({ a: 'b' }), limit: { requests_per_unit: 5 } }] }, /^descriptors\[0\]\.limit\.unit must be one of SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR \(or its enum number\), got "UNKNOWN"$/],
      ['hits over uint32', { domain: 'classic', descriptors: [{ entries: entries({ a: 'b' }), hits_addend: { value: 2 ** 40 } }] }, /^descriptors\[0\]\.hits_addend must be a whole number from 0 to 4294967295, got 1099511627776$/],
      ['65 descriptors', { domain: 'classic', descriptors: Array.from({ length: 65 }, () => ({ entries: entries({ a: 'b' }) })) }, /^got 65 descriptors; at most 64 are accepted in one request$/],
      ['33 entries', { domain: 'classic', descriptors: [{ entries: Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, value: 'v' })) }] }, /^descriptors\[0\] has 33 entries; at most 32 are accepted in one descriptor$/],
    ])('%s: INVALID_ARGUMENT with a message saying what to fix, and a rejected event', async (_name, request, message) => {
      const before = rejected.length;
      const error = await grpcFailure(client.shouldRateLimit(request));
      expect(error.code).toBe(GrpcStatus.INVALID_ARGUMENT);
      expect(error.details).toMatch(message);
      expect(error.metadata.get('tollgate-error-code')).toEqual(['ERR_TOLLGATE_INVALID_CHECK']);
      expect(rejected.slice(before)).toEqual([{ via: 'grpc', reason: error.details }]);
    });

    it('a bad request consumes nothing', async () => {
      await grpcFailure(client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ action: 'login', user: 'dave' }) }, { entries: [{ key: '', value: 'x' }] }] }));
      expect((await client.shouldRateLimit(login('dave'))).statuses[0]!.limit_remaining).toBe(4);
    });

    it('emits a check event per answered call (via grpc), with the counter keys', async () => {
      const before = checks.length;
      await client.shouldRateLimit({ domain: 'classic', descriptors: [{ entries: entries({ action: 'login', user: 'eve' }) }, { entries: entries({ x: 'y' }) }] });
      const events = checks.slice(before);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({ via: 'grpc', domain: 'classic', keys: ['classic|action=login|user=eve', undefined] });
      expect(events[0]!.result.overallCode).toBe('OK');
      expect(events[0]!.durationMs).toBeGreaterThanOrEqual(0);
    });

    it('messages over 1 MiB are refused (RESOURCE_EXHAUSTED); unparseable bytes fail the call, not the server', async () => {
      const huge = encodeFields([[1, 'classic'], [2, encodeFields([[1, encodeFields([[1, 'k'], [2, 'v'.repeat(MAX_MESSAGE_BYTES)]])]])]]);
      const exhausted = await grpcFailure(client.shouldRateLimitRaw(huge));
      expect(exhausted.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
      // grpc-js's own words, with the size it got and the most it takes.
      expect(exhausted.details).toBe(`Received message larger than max (${huge.length} vs ${MAX_MESSAGE_BYTES})`);
      // A length running past the end of the message: grpc-js refuses it before the handler runs.
      const garbage = await grpcFailure(client.shouldRateLimitRaw(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])));
      expect(garbage.code).toBe(GrpcStatus.INVALID_ARGUMENT);
      expect((await client.shouldRateLimit(login('after-garbage'))).overall_code).toBe('OK');
    });

    it('speaks envoy’s field numbers: a hand-encoded request, the response read byte by byte', async () => {
      // RateLimitRequest { domain = 1; descriptors = 2; hits_addend = 3 }, RateLimitDescriptor
      // { entries = 1; limit = 2; hits_addend = 3 (UInt64Value { value = 1 }) }, Entry { key = 1; value = 2 }.
      const entry = (key: string, value: string) => encodeFields([[1, key], [2, value]]);
      const request = encodeFields([
        [1, 'classic'],
        [2, encodeFields([[1, entry('action', 'claim_reward')], [1, entry('device_id', 'wire')], [3, encodeFields([[1, 2]])]])],
        [2, encodeFields([[1, entry('action', 'login')], [1, entry('user', 'wire')]])],
        [3, 3],
      ]);
      const response = readFields(await client.shouldRateLimitRaw(request));
      // RateLimitResponse { overall_code = 1; statuses = 2; response_headers_to_add = 3; ... }, Code OK = 1.
      expect(fieldValues(response, 1)).toEqual([1]);
      const statuses = fieldValues(response, 2).map((bytes) => readFields(bytes as Buffer));
      expect(statuses).toHaveLength(2);
      // DescriptorStatus { code = 1; current_limit = 2; limit_remaining = 3; duration_until_reset = 4 }
      // RateLimit { requests_per_unit = 1; unit = 2; name = 3 }, Unit WEEK = 7, MINUTE = 2.
      const [week, minute] = statuses as [ReturnType<typeof readFields>, ReturnType<typeof readFields>];
      expect(fieldValues(week, 1)).toEqual([1]);
      const weekLimit = readFields(fieldValues(week, 2)[0] as Buffer);
      expect(fieldValues(weekLimit, 1)).toEqual([5]);
      expect(fieldValues(weekLimit, 2)).toEqual([7]);
      expect(fieldValues(week, 3)).toEqual([3]); // 5 - the descriptor's 2 hits
      const weekReset = readFields(fieldValues(week, 4)[0] as Buffer); // Duration { seconds = 1; nanos = 2 }
      expect(fieldValues(weekReset, 1)).toEqual([604_800]);
      const minuteLimit = readFields(fieldValues(minute, 2)[0] as Buffer);
      expect([fieldValues(minuteLimit, 1), fieldValues(minuteLimit, 2)]).toEqual([[5], [2]]);
      expect(fieldValues(minute, 3)).toEqual([2]); // 5 - the request's 3 hits
      // HeaderValue { key = 1; value = 2 }
      const headers = fieldValues(response, 3).map((bytes) => readFields(bytes as Buffer));
      const named = Object.fromEntries(headers.map((h) => [String(fieldValues(h, 1)[0]), String(fieldValues(h, 2)[0])]));
      expect(quotas(named['ratelimit-policy'])).toBe('5;w=604800, 5;w=60');
      expect(named['x-ratelimit-remaining']).toBe('2');
    });

    it('an OVER_LIMIT answer on the wire: overall_code 2, the status code 2', async () => {
      const entry = (key: string, value: string) => encodeFields([[1, key], [2, value]]);
      const descriptor = encodeFields([[1, entry('action', 'login')], [1, entry('user', 'wire-over')], [3, encodeFields([[1, 6]])]]);
      const request = encodeFields([[1, 'classic'], [2, descriptor]]);
      const response = readFields(await client.shouldRateLimitRaw(request));
      expect(fieldValues(response, 1)).toEqual([2]);
      expect(fieldValues(readFields(fieldValues(response, 2)[0] as Buffer), 1)).toEqual([2]);
    });

    it('grpc.health.v1: SERVING for the server and the rate limit service, NOT_FOUND otherwise; Watch streams', async () => {
      expect(await client.health()).toBe('SERVING');
      expect(await client.health(RATE_LIMIT_SERVICE)).toBe('SERVING');
      expect((await grpcFailure(client.health('no.such.Service'))).code).toBe(GrpcStatus.NOT_FOUND);
      const watch = client.watchHealth();
      const unknown = client.watchHealth('no.such.Service');
      await waitFor(() => watch.statuses.length > 0 && unknown.statuses.length > 0, 'health watch statuses');
      expect(watch.statuses).toEqual(['SERVING']);
      expect(unknown.statuses).toEqual(['SERVICE_UNKNOWN']);
      watch.cancel();
      unknown.cancel();
      expect((await watch.ended)?.code).toBe(GrpcStatus.CANCELLED);
    });
  });

  describe('the same envoy requests give the same answers over HTTP /json and gRPC', () => {
    let overJson: RunningService;
    let overGrpc: RunningService;
    let client: RateLimitClient;

    // One controlled clock for both services: per-second limits must see every row at the same
    // instant on both (real time let a slow call cross a second boundary on one of them).
    let now = 1_800_000_000_250;
    const hooks: ServiceHooks = { clock: () => now };

    beforeAll(async () => {
      [overJson, overGrpc] = await Promise.all([start({}, hooks), start({}, hooks)]);
      client = rateLimitClient(overGrpc.grpcPort!);
    });

    afterAll(async () => {
      client.close();
      await Promise.all([overJson.close(), overGrpc.close()]);
    });

    /** envoy's proto3 JSON, as /json takes it. */
    interface JsonRequest {
      domain?: string;
      descriptors?: { entries: { key: string; value: string }[]; hits_addend?: number }[];
      hits_addend?: number;
    }
    const d = (pairs: Record<string, string>, hits?: number) => ({ entries: entries(pairs), ...(hits !== undefined ? { hits_addend: hits } : {}) });
    const repeat = (times: number, request: JsonRequest): JsonRequest[] => Array.from({ length: times }, () => request);
    const TABLE: JsonRequest[] = [
      ...repeat(6, { domain: 'classic', descriptors: [d({ action: 'login', user: 'alice' })] }),
      { domain: 'classic', descriptors: [d({ message_type: 'marketing', to_user: '42' })] },
      ...repeat(3, { domain: 'classic', descriptors: [d({ action: 'post', user: 'p' })], hits_addend: 120 }),
      { domain: 'classic', descriptors: [d({ action: 'signup', remote_address: '203.0.113.7' }), d({ action: 'claim_reward', device_id: 'd-9f2' }, 4)] },
      { domain: 'classic', descriptors: [d({ action: 'claim_reward', device_id: 'd-9f2' }, 2)] },
      { domain: 'classic', descriptors: [d({ action: 'unknown' })] },
      { domain: 'hybrid', descriptors: [d({ user_id: '42' }), d({ remote_address: '203.0.113.7' })], hits_addend: 30 },
      ...repeat(2, { domain: 'hybrid', descriptors: [d({ user_id: '42' }), d({ remote_address: '203.0.113.7' })], hits_addend: 20 }),
      { domain: 'per_api_key', descriptors: [d({ plan: 'enterprise', api_key: 'k_123' })] },
      { domain: 'per_api_key', descriptors: [d({ plan: 'free', api_key: 'k_internal' })] },
      ...repeat(12, { domain: 'per_api_key', descriptors: [d({ plan: 'free', api_key: 'k_9' })] }),
      { domain: 'per_ip', descriptors: [d({ remote_address: '192.0.2.1' }), d({ remote_address: '192.0.2.2' }, 100), d({ remote_address: '192.0.2.3' }, 101)] },
      { domain: 'per_user', descriptors: [d({ user_id: '7' }, 10), d({ user_id: '8' })], hits_addend: 5 },
      { domain: 'nowhere', descriptors: [d({ a: 'b' })] },
    ];
    const INVALID: JsonRequest[] = [
      { descriptors: [d({ a: 'b' })] },
      { domain: 'classic', descriptors: [] },
      { domain: 'classic' },
      { domain: 'classic', descriptors: [{ entries: [{ key: '', value: 'v' }] }] },
      { domain: 'classic', descriptors: [d({ a: 'b' }, 2 ** 40)] },
      { domain: 'classic', descriptors: Array.from({ length: 65 }, () => d({ a: 'b' })) },
    ];

    const toGrpc = (request: JsonRequest): RateLimitRequestMessage => ({
      ...(request.domain !== undefined ? { domain: request.domain } : {}),
      ...(request.descriptors !== undefined
        ? { descriptors: request.descriptors.map((x) => ({ entries: x.entries, ...(x.hits_addend !== undefined ? { hits_addend: { value: x.hits_addend } } : {}) })) }
        : {}),
      ...(request.hits_addend !== undefined ? { hits_addend: request.hits_addend } : {}),
    });

    const RATE_LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit', 'retry-after', 'x-ratelimit-retry-after'];
    /** One answer, transport aside: codes, limits, remaining, seconds to reset, headers. */
    interface Answer {
      overall: string;
      statuses: { code: string; limit: { requestsPerUnit: number; unit: string; name: string } | null; remaining: number; resetSeconds: number | null }[];
      headers: Record<string, string>;
    }

    async function overHttp(request: JsonRequest): Promise<Answer | 'invalid'> {
      const response = await fetch(`http://127.0.0.1:${overJson.httpPort}/json`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
      if (response.status === 400) return 'invalid';
      expect([200, 429]).toContain(response.status);
      type JsonStatus = { code: string; currentLimit?: { requestsPerUnit: number; unit: string; name?: string }; limitRemaining?: number; durationUntilReset?: string };
      const body = (await response.json()) as { overallCode: string; statuses: JsonStatus[] };
      expect(response.status).toBe(body.overallCode === 'OK' ? 200 : 429);
      const headers: Record<string, string> = {};
      for (const name of RATE_LIMIT_HEADERS) if (response.headers.has(name)) headers[name] = response.headers.get(name)!;
      return {
        overall: body.overallCode,
        statuses: body.statuses.map((status) => ({
          code: status.code,
          limit: status.currentLimit === undefined ? null : { requestsPerUnit: status.currentLimit.requestsPerUnit, unit: status.currentLimit.unit, name: status.currentLimit.name ?? '' },
          remaining: status.limitRemaining ?? 0,
          resetSeconds: status.durationUntilReset === undefined ? null : Number(/^(\d+)s$/.exec(status.durationUntilReset)![1]),
        })),
        headers,
      };
    }

    async function overGrpcCall(request: JsonRequest): Promise<Answer | 'invalid'> {
      let response: RateLimitResponseMessage;
      try {
        response = await client.shouldRateLimit(toGrpc(request));
      } catch (error) {
        expect((error as { code: number }).code).toBe(GrpcStatus.INVALID_ARGUMENT);
        return 'invalid';
      }
      return {
        overall: response.overall_code,
        statuses: response.statuses.map((status) => ({
          code: status.code,
          limit: status.current_limit === null ? null : { requestsPerUnit: status.current_limit.requests_per_unit, unit: status.current_limit.unit, name: status.current_limit.name },
          remaining: status.limit_remaining,
          resetSeconds: status.duration_until_reset === null ? null : status.duration_until_reset.seconds,
        })),
        headers: headerMap(response),
      };
    }

    /** Equal, except that times read a moment apart may differ by a second. */
    function expectSameAnswer(json: Answer, grpc: Answer, row: string): void {
      const close = (a: number | null, b: number | null, what: string) => {
        if (a === null || b === null) expect(a, what).toBe(b);
        else expect(Math.abs(a - b), `${what}: ${a} vs ${b}`).toBeLessThanOrEqual(1);
      };
      expect(grpc.overall, row).toBe(json.overall);
      expect(grpc.statuses.length, row).toBe(json.statuses.length);
      json.statuses.forEach((status, i) => {
        const other = grpc.statuses[i]!;
        expect({ code: other.code, limit: other.limit, remaining: other.remaining }, `${row} status ${i}`).toEqual({ code: status.code, limit: status.limit, remaining: status.remaining });
        close(status.resetSeconds, other.resetSeconds, `${row} status ${i} reset`);
      });
      expect(Object.keys(grpc.headers).sort(), row).toEqual(Object.keys(json.headers).sort());
      for (const [name, value] of Object.entries(json.headers)) {
        const other = grpc.headers[name]!;
        if (name === 'ratelimit') {
          // Items differ only in t (seconds to reset), which may tick between the two calls.
          const resets = (text: string) => [...text.matchAll(/;t=(\d+)/g)].map((match) => Number(match[1]));
          expect(other.replace(/;t=\d+/g, ''), `${row} ${name}`).toBe(value.replace(/;t=\d+/g, ''));
          resets(value).forEach((reset, i) => close(reset, resets(other)[i]!, `${row} ${name}`));
        } else if (/reset|retry-after/.test(name)) close(Number(value), Number(other), `${row} ${name}`);
        else expect(other, `${row} ${name}`).toBe(value);
      }
    }

    it('a table of valid requests, in order, on two fresh services: same codes, statuses, remaining and headers', async () => {
      let overLimit = 0;
      for (const [i, request] of TABLE.entries()) {
        now += 10; // every row in the same second, a moment after the one before
        const [json, grpc] = await Promise.all([overHttp(request), overGrpcCall(request)]);
        expect(json, `row ${i}`).not.toBe('invalid');
        expect(grpc, `row ${i}`).not.toBe('invalid');
        expectSameAnswer(json as Answer, grpc as Answer, `row ${i} ${JSON.stringify(request).slice(0, 80)}`);
        if ((json as Answer).overall === 'OVER_LIMIT') overLimit++;
      }
      // The table exercises both answers, not only OK.
      expect(overLimit).toBeGreaterThanOrEqual(4);
    });

    it('the same malformed requests are refused by both: 400 and INVALID_ARGUMENT', async () => {
      for (const request of INVALID) {
        expect(await overHttp(request), JSON.stringify(request).slice(0, 80)).toBe('invalid');
        expect(await overGrpcCall(request), JSON.stringify(request).slice(0, 80)).toBe('invalid');
      }
    });
  });

  describe('store outage and shutdown', () => {
    it('Redis down, failure mode closed with --fail-closed-status 503: UNAVAILABLE (not a crash) saying so, health NOT_SERVING; back up: answers again', async () => {
      const redis = await startRedis();
      const service = await start({ redis: redis.url, 'failure-mode': 'closed', 'fail-closed-status': '503' });
      const client = rateLimitClient(service.grpcPort!);
      try {
        expect((await client.shouldRateLimit(login('redis-user'))).statuses[0]!.limit_remaining).toBe(4);
        expect(await client.health()).toBe('SERVING');
        process.kill(redis.pid, 'SIGKILL'); // the outage: the server is gone, its port closed
        const error = await grpcFailure(client.shouldRateLimit(login('redis-user')));
        expect(error.code).toBe(GrpcStatus.UNAVAILABLE);
        expect(error.details).toMatch(/store is unavailable and the failure mode is closed/);
        expect(error.metadata.get('tollgate-degraded')).toEqual(['fail-closed']);
        expect(await client.health()).toBe('NOT_SERVING');
        await redis.restart();
        await waitFor(async () => (await client.health()) === 'SERVING', 'health SERVING after Redis restarts');
        expect((await client.shouldRateLimit(login('redis-user'))).overall_code).toBe('OK');
      } finally {
        client.close();
        await service.close();
        await redis.stop();
      }
    }, 30_000);

    it('close() lets an in-flight call finish (Redis held busy by DEBUG SLEEP), then stops', async () => {
      const redis = await startRedis(['--enable-debug-command', 'yes']);
      // A deadline past the sleep: the call waits for Redis instead of being answered by the failure mode.
      const service = await start({ redis: redis.url, 'deadline-ms': '5000' });
      const client = rateLimitClient(service.grpcPort!);
      try {
        expect((await client.shouldRateLimit(login('slow'))).overall_code).toBe('OK');
        const slept = cliAsync(redis.port, 'DEBUG', 'SLEEP', '0.4');
        await new Promise((resolve) => setTimeout(resolve, 100)); // Redis is asleep now
        const order: string[] = [];
        const inFlight = client.shouldRateLimit(login('slow')).then((answer) => {
          order.push('answered');
          return answer;
        });
        await new Promise((resolve) => setTimeout(resolve, 50)); // the call reached the server
        order.push('closing');
        const closed = service.close().then(() => order.push('closed'));
        const answer = await inFlight;
        await closed;
        await slept;
        expect(answer.statuses[0]!.limit_remaining).toBe(3);
        expect(order).toEqual(['closing', 'answered', 'closed']);
      } finally {
        client.close();
        await service.close();
        await redis.stop();
      }
    }, 30_000);

    it('close(): Watch streams end with NOT_SERVING, close resolves well within the grace period, then calls are refused', async () => {
      const service = await start();
      const client = rateLimitClient(service.grpcPort!);
      try {
        const watch = client.watchHealth();
        await waitFor(() => watch.statuses.length > 0, 'the first health status');
        const started = Date.now();
        await service.close();
        expect(Date.now() - started).toBeLessThan(SHUTDOWN_GRACE_MS);
        await watch.ended;
        expect(watch.statuses).toEqual(['SERVING', 'NOT_SERVING']);
        expect((await grpcFailure(client.shouldRateLimit(login('late')))).code).toBe(GrpcStatus.UNAVAILABLE);
      } finally {
        client.close();
      }
    });
  });

  describe('tollgate serve (the real CLI in a child process)', () => {
    it('logs its gRPC port, decides over gRPC, and exits 0 on SIGTERM', async () => {
      const child = spawn(process.execPath, ['dist/cli/main.js', 'serve', '--config', 'examples/rules', '--port', '0', '--grpc-port', '0', '--admin-port', '0', '--host', '127.0.0.1', '--response-headers', 'full', '--grpc-server', grpcServer], {
        env: { ...process.env, TOLLGATE_LOG_LEVEL: 'info' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const logs: Record<string, unknown>[] = [];
      createInterface({ input: child.stdout }).on('line', (line) => logs.push(JSON.parse(line) as Record<string, unknown>));
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      let client: RateLimitClient | undefined;
      try {
        await waitFor(() => logs.some((line) => String(line.msg).startsWith('gRPC listening')) || child.exitCode !== null, 'the gRPC listening line');
        const line = logs.find((entry) => String(entry.msg).startsWith('gRPC listening'));
        expect(line, stderr).toBeDefined();
        expect(line!.msg).toBe(`gRPC listening on 127.0.0.1:${String(line!.port)}`);
        client = rateLimitClient(Number(line!.port));
        expect(await client.health()).toBe('SERVING');
        for (let i = 0; i < 5; i++) expect((await client.shouldRateLimit(login('cli'))).overall_code).toBe('OK');
        const denied = await client.shouldRateLimit(login('cli'));
        expect(denied.overall_code).toBe('OVER_LIMIT');
        expect(headerMap(denied)['x-ratelimit-limit']).toBe('5');
      } finally {
        client?.close();
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
      expect(logs.some((line) => line.msg === 'stopped')).toBe(true);
    }, 20_000);
  });
});

async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** `RateLimit-Policy` reduced to quota and window per item (`5;w=60, 300;w=60`). */
function quotas(field: string | undefined): string {
  return [...(field ?? '').matchAll(/;q=(\d+);w=(\d+)/g)].map((match) => `${match[1]};w=${match[2]}`).join(', ');
}
