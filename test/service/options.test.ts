/** `tollgate serve` settings: flags over environment over settings file; bad values are errors. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/index.js';
import { resolveServiceOptions } from '../../src/service/options.js';

describe('serve settings', () => {
  it('defaults', () => {
    expect(resolveServiceOptions({}, {})).toEqual({
      port: 8080,
      grpcPort: 8081,
      grpcServer: 'http2',
      host: '0.0.0.0',
      adminPort: 6070,
      adminHost: '127.0.0.1',
      adminPublic: false,
      logLevel: 'info',
      workers: 1,
      maxKeys: 1_000_000,
      mergeDomains: false,
      responseHeaders: 'off',
      headerNames: { limit: 'RateLimit-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' },
      responseDynamicMetadata: false,
      shadowMode: false,
      quotaMode: false,
      failureMode: 'local',
      expectedNodes: 1,
      deadlineMs: 50,
      failClosedStatus: 429,
      localCacheKeys: 100_000,
      drainDelayMs: 5_000,
      shutdownTimeoutMs: 10_000,
      connections: { keepAliveTimeoutMs: 65_000, headersTimeoutMs: 5_000, requestTimeoutMs: 10_000, maxRequestsPerSocket: 0 },
      grpcConnections: { idleTimeoutMs: 300_000, maxConnectionAgeMs: 86_400_000, maxConnectionAgeGraceMs: 3_600_000, receiveTimeoutMs: 10_000, maxConcurrentStreams: 100, maxConnections: 10_000 },
    });
  });

  it('gRPC connection limits: durations with a unit, 0 turning idle and age off; counts; bad values refused', () => {
    const flags = { 'grpc-idle-timeout': '0', 'grpc-max-connection-age': '30m', 'grpc-max-connection-age-grace': '1500ms', 'grpc-receive-timeout': '2s', 'grpc-max-concurrent-streams': '10' };
    expect(resolveServiceOptions(flags, { TOLLGATE_GRPC_MAX_CONNECTIONS: '50' }).grpcConnections).toEqual({
      idleTimeoutMs: 0, maxConnectionAgeMs: 1_800_000, maxConnectionAgeGraceMs: 1_500, receiveTimeoutMs: 2_000, maxConcurrentStreams: 10, maxConnections: 50,
    });
    expect(() => resolveServiceOptions({ 'grpc-receive-timeout': '0' }, {})).toThrow(new InvalidOptionError('--grpc-receive-timeout (or TOLLGATE_GRPC_RECEIVE_TIMEOUT) must be a duration from 1 ms to 604800000 ms, got "0"'));
    expect(() => resolveServiceOptions({ 'grpc-max-connection-age-grace': '1500' }, {})).toThrow(new InvalidOptionError('--grpc-max-connection-age-grace (or TOLLGATE_GRPC_MAX_CONNECTION_AGE_GRACE) 1500 has no unit: write it with one, "1500s" for seconds or "1500ms" for milliseconds'));
    expect(() => resolveServiceOptions({ 'grpc-idle-timeout': 'soon' }, {})).toThrow(/--grpc-idle-timeout \(or TOLLGATE_GRPC_IDLE_TIMEOUT\) "soon" is not a duration/);
    expect(() => resolveServiceOptions({ 'grpc-max-connection-age': '8d' }, {})).toThrow(/must be a duration from 0 ms to 604800000 ms, got "8d"/);
    expect(() => resolveServiceOptions({}, { TOLLGATE_GRPC_MAX_CONCURRENT_STREAMS: '0' })).toThrow(/--grpc-max-concurrent-streams \(or TOLLGATE_GRPC_MAX_CONCURRENT_STREAMS\) must be a whole number of calls from 1 to 1000000, got "0"/);
  });

  it('connection limits: from flags, TOLLGATE_* variables or the settings file; out of range or headers > request refused', () => {
    expect(resolveServiceOptions({ 'keep-alive-timeout': '70s', 'max-requests-per-socket': '1000' }, { TOLLGATE_HEADERS_TIMEOUT: '2000ms', TOLLGATE_REQUEST_TIMEOUT: '3s' }).connections).toEqual({
      keepAliveTimeoutMs: 70_000,
      headersTimeoutMs: 2_000,
      requestTimeoutMs: 3_000,
      maxRequestsPerSocket: 1_000,
    });
    expect(() => resolveServiceOptions({ 'keep-alive-timeout': '0' }, {})).toThrow(
      new InvalidOptionError('--keep-alive-timeout (or TOLLGATE_KEEP_ALIVE_TIMEOUT) must be a duration from 1 ms to 3600000 ms, got "0"'),
    );
    expect(() => resolveServiceOptions({}, { TOLLGATE_REQUEST_TIMEOUT: '30' })).toThrow(
      new InvalidOptionError('--request-timeout (or TOLLGATE_REQUEST_TIMEOUT) 30 has no unit: write it with one, "30s" for seconds or "30ms" for milliseconds'),
    );
    expect(() => resolveServiceOptions({}, { TOLLGATE_MAX_REQUESTS_PER_SOCKET: '-1' })).toThrow(/--max-requests-per-socket \(or TOLLGATE_MAX_REQUESTS_PER_SOCKET\) must be a whole number of requests from 0 to 1000000000 \(0: no cap\), got "-1"/);
    expect(() => resolveServiceOptions({ 'headers-timeout': '20s' }, {})).toThrow(
      new InvalidOptionError('--headers-timeout (or TOLLGATE_HEADERS_TIMEOUT) (20000 ms) must not exceed --request-timeout (or TOLLGATE_REQUEST_TIMEOUT) (10000 ms): the headers are part of the request'),
    );
  });

  it('--grpc-server: http2 (default) or grpc-js, from the flag or TOLLGATE_GRPC_SERVER; anything else refused', () => {
    expect(resolveServiceOptions({ 'grpc-server': 'grpc-js' }, {}).grpcServer).toBe('grpc-js');
    expect(resolveServiceOptions({}, { TOLLGATE_GRPC_SERVER: 'http2' }).grpcServer).toBe('http2');
    expect(() => resolveServiceOptions({ 'grpc-server': 'grpcjs' }, {})).toThrow(
      new InvalidOptionError('--grpc-server (or TOLLGATE_GRPC_SERVER) must be http2 (node:http2, the default) or grpc-js (@grpc/grpc-js), got "grpcjs"'),
    );
  });

  it('shutdown: drain delay (0 allowed) and shutdown timeout, durations with a unit up to ten minutes; a bare number other than 0 refused with the fix', () => {
    expect(resolveServiceOptions({ 'drain-delay': '0', 'shutdown-timeout': '250ms' }, {})).toMatchObject({ drainDelayMs: 0, shutdownTimeoutMs: 250 });
    expect(resolveServiceOptions({}, { TOLLGATE_DRAIN_DELAY: '10m', TOLLGATE_SHUTDOWN_TIMEOUT: '1ms' })).toMatchObject({ drainDelayMs: 600_000, shutdownTimeoutMs: 1 });
    expect(resolveServiceOptions({ 'drain-delay': '15ms' }, { TOLLGATE_DRAIN_DELAY: '30s' }).drainDelayMs).toBe(15);
    expect(resolveServiceOptions({}, { TOLLGATE_DRAIN_DELAY: '5s' }).drainDelayMs).toBe(5_000);
    const refusals: Array<[Record<string, string>, Record<string, string>, string]> = [
      [{ 'drain-delay': '5' }, {}, '--drain-delay (or TOLLGATE_DRAIN_DELAY) 5 has no unit: write it with one, "5s" for seconds or "5ms" for milliseconds'],
      [{}, { TOLLGATE_SHUTDOWN_TIMEOUT: '10000' }, '--shutdown-timeout (or TOLLGATE_SHUTDOWN_TIMEOUT) 10000 has no unit: write it with one, "10000s" for seconds or "10000ms" for milliseconds'],
      [{ 'drain-delay': '-1' }, {}, '--drain-delay (or TOLLGATE_DRAIN_DELAY) "-1" is not a duration'],
      [{ 'drain-delay': '1.5s' }, {}, '--drain-delay (or TOLLGATE_DRAIN_DELAY) "1.5s" is not a duration'],
      [{ 'drain-delay': '600001ms' }, {}, '--drain-delay (or TOLLGATE_DRAIN_DELAY) must be a duration from 0 ms to 600000 ms, got "600001ms"'],
      [{ 'shutdown-timeout': '0' }, {}, '--shutdown-timeout (or TOLLGATE_SHUTDOWN_TIMEOUT) must be a duration from 1 ms to 600000 ms, got "0"'],
      [{}, { TOLLGATE_SHUTDOWN_TIMEOUT: 'soon' }, '--shutdown-timeout (or TOLLGATE_SHUTDOWN_TIMEOUT) "soon" is not a duration'],
    ];
    for (const [flags, env, message] of refusals) expect(() => resolveServiceOptions(flags, env)).toThrow(message);
  });

  it('what checks get while the store fails: failure mode, expected nodes, deadline, fail-closed status, validated', () => {
    const env = { TOLLGATE_FAILURE_MODE: 'CLOSED', TOLLGATE_EXPECTED_NODES: '3', TOLLGATE_DEADLINE_MS: '20', TOLLGATE_FAIL_CLOSED_STATUS: '503' };
    expect(resolveServiceOptions({}, env)).toMatchObject({ failureMode: 'closed', expectedNodes: 3, deadlineMs: 20, failClosedStatus: 503 });
    expect(resolveServiceOptions({ 'failure-mode': 'open' }, env).failureMode).toBe('open');
    const refusals: Array<[Record<string, string>, RegExp]> = [
      [{ 'failure-mode': 'throw' }, /--failure-mode \(or TOLLGATE_FAILURE_MODE\) must be local .* got "throw"/],
      [{ 'expected-nodes': '0' }, /--expected-nodes \(or TOLLGATE_EXPECTED_NODES\) must be a whole number of nodes from 1 to 10000, got "0"/],
      [{ 'deadline-ms': '1.5' }, /--deadline-ms \(or TOLLGATE_DEADLINE_MS\) must be a whole number of ms from 1 to 60000, got "1.5"/],
      [{ 'deadline-ms': '60001' }, /from 1 to 60000, got "60001"/],
      [{ 'local-cache-keys': '-1' }, /--local-cache-keys \(or TOLLGATE_LOCAL_CACHE_KEYS\) must be a whole number of keys from 0 to 10000000 \(0: off\), got "-1"/],
      [{ 'fail-closed-status': '500' }, /--fail-closed-status \(or TOLLGATE_FAIL_CLOSED_STATUS\) must be 429 \(OVER_LIMIT\) or 503 \(unavailable\), got "500"/],
    ];
    for (const [flags, message] of refusals) expect(() => resolveServiceOptions(flags, {})).toThrow(message);
  });

  it("envoy's settings: switches, header names and the headers style, validated", () => {
    const env = {
      TOLLGATE_MERGE_DOMAINS: 'true',
      TOLLGATE_RESPONSE_HEADERS: 'envoy',
      TOLLGATE_HEADER_LIMIT: 'X-Limit',
      TOLLGATE_RESPONSE_DYNAMIC_METADATA: '1',
      TOLLGATE_SHADOW_MODE: 'false',
      TOLLGATE_QUOTA_MODE: 'TRUE',
    };
    expect(resolveServiceOptions({}, env)).toMatchObject({
      mergeDomains: true,
      responseHeaders: 'envoy',
      headerNames: { limit: 'X-Limit', remaining: 'RateLimit-Remaining', reset: 'RateLimit-Reset' },
      responseDynamicMetadata: true,
      shadowMode: false,
      quotaMode: true,
    });
    expect(resolveServiceOptions({ 'response-headers': 'true' }, {}).responseHeaders).toBe('envoy');
    expect(resolveServiceOptions({ 'response-headers': 'full' }, {}).responseHeaders).toBe('full');
    expect(() => resolveServiceOptions({}, { TOLLGATE_MERGE_DOMAINS: 'yes please' })).toThrow(
      '--merge-domains (or TOLLGATE_MERGE_DOMAINS) must be true or false, got "yes please"',
    );
    expect(() => resolveServiceOptions({ 'response-headers': 'some' }, {})).toThrow(/--response-headers \(or TOLLGATE_RESPONSE_HEADERS\) must be off, envoy/);
    expect(() => resolveServiceOptions({ 'header-reset': 'Bad Header:' }, {})).toThrow(
      '--header-reset (or TOLLGATE_HEADER_RESET) must be an HTTP header name like RateLimit-Reset, got "Bad Header:"',
    );
  });

  it('flags win over the environment, which wins over the settings file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-settings-'));
    try {
      const file = join(dir, 'tollgate.yaml');
      writeFileSync(file, 'port: 9000\ngrpc-port: 9001\nconfig: rules/\nlog-level: warn\n');
      const options = resolveServiceOptions({ port: '7000', settings: file }, { TOLLGATE_GRPC_PORT: '7001' });
      expect(options).toMatchObject({ port: 7000, grpcPort: 7001, config: 'rules/', logLevel: 'warn' });
      writeFileSync(file, 'prot: 9000\n');
      expect(() => resolveServiceOptions({ settings: file }, {})).toThrow(/unknown setting "prot"/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ port: 'abc' }, {}, /--port \(or TOLLGATE_PORT\) must be a port from 0 to 65535, got "abc"/],
    [{}, { TOLLGATE_PORT: '70000' }, /must be a port/],
    [{ redis: 'localhost:6379' }, {}, /must look like redis:\/\/host:6379/],
    [{ redis: 'redis://a:1', 'redis-cluster': 'b:2' }, {}, /not --redis and --redis-cluster/],
    [{ 'redis-cluster': 'a:1,b' }, {}, /host:port,host:port/],
    [{ 'admin-token': 'short' }, {}, /at least 16 characters/],
    [{ 'log-level': 'loud' }, {}, /must be one of fatal/],
    [{ workers: '2' }, {}, /needs --redis, --redis-cluster, --redis-sentinel or --memcached/],
    [{ workers: '0', redis: 'redis://a:1' }, {}, /from 1 to 64/],
    [{ settings: '/nonexistent/tollgate.yaml' }, {}, /cannot be read/],
  ])('%j %j is refused', (flags, env, message) => {
    expect(() => resolveServiceOptions(flags, env)).toThrow(InvalidOptionError);
    expect(() => resolveServiceOptions(flags, env)).toThrow(message);
  });
});
