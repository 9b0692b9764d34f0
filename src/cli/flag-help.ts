/**
 * What each flag of `serve`, `gateway`, `replicate`, `simulate` and `validate` means, for their
 * `--help`. The help lists the flags of the table the command's parser reads (SERVE_FLAGS,
 * GATEWAY_FLAGS, ...) and looks each up here, so a flag the parser takes cannot be left out of the
 * help; test/cli/command-help.test.ts checks every one has its text here.
 */

/** One flag's line: its value's placeholder (none for a switch), what it does, its default. */
export interface FlagText {
  readonly value?: string;
  readonly text: string;
  readonly fallback?: string;
}

/** `serve`'s flags (the gateway shares most of them). */
export const SERVICE_FLAG_TEXT: Readonly<Record<string, FlagText>> = {
  config: { value: 'FILE|DIR', text: 'rules (YAML), watched and reloaded live' },
  redis: { value: 'URL', text: 'share counters and rules through Redis (default: the memory store)' },
  'redis-cluster': { value: 'H:P,...', text: '... or through a Redis Cluster, from these seed nodes' },
  'redis-sentinel': { value: 'H:P,...', text: '... or a primary these Sentinels watch' },
  'redis-sentinel-name': { value: 'NAME', text: "the Sentinels' name of the primary", fallback: 'mymaster' },
  memcached: { value: 'H:P,...', text: '... or share counters (not rules) through memcached servers, keys spread by consistent hashing' },
  port: { value: 'N', text: 'the HTTP decision listener (0: a free port)', fallback: '8080' },
  'grpc-port': { value: 'N', text: "envoy's gRPC listener (0: a free port)", fallback: '8081' },
  'grpc-server': { value: 'S', text: 'what serves gRPC: http2 (node:http2) or grpc-js', fallback: 'http2' },
  host: { value: 'ADDR', text: 'the address to listen on', fallback: '0.0.0.0' },
  'admin-token': { value: 'TOKEN', text: 'enables PUT /v1/rules and the key admin endpoints (16+ characters)' },
  'admin-token-file': { value: 'FILE', text: 'the admin token from a file (ps shows flags)' },
  'admin-port': { value: 'N', text: 'the admin listener: dashboard, /metrics, /v1/events, rules, admin API', fallback: '6070' },
  'admin-bind': { value: 'ADDR', text: 'its address; beyond loopback needs --metrics-token or --admin-public', fallback: '127.0.0.1' },
  'metrics-token': { value: 'TOKEN', text: 'required (Bearer) for /metrics, /dashboard, /v1/events, GET /v1/rules' },
  'metrics-token-file': { value: 'FILE', text: 'the metrics token from a file' },
  'admin-public': { text: 'the admin listener beyond loopback without a metrics token, on purpose' },
  'tls-cert': { value: 'FILE', text: 'TLS on every listener: the PEM certificate chain (reloaded on change)' },
  'tls-key': { value: 'FILE', text: "... and its private key" },
  'tls-client-ca': { value: 'FILE', text: 'mutual TLS: clients need a certificate this CA signed' },
  'tls-client-san': { value: 'NAME', text: '... carrying NAME among its alternative names' },
  'log-level': { value: 'LEVEL', text: 'fatal, error, warn, info, debug, trace or silent', fallback: 'info' },
  workers: { value: 'N', text: 'processes on the same ports (above 1 needs Redis)', fallback: '1' },
  'merge-domains': { text: "one domain across several files is merged (envoy's MERGE_DOMAIN_CONFIG)" },
  'response-headers': { value: 'MODE', text: 'rate-limit headers in envoy answers: off, envoy or full', fallback: 'off' },
  'header-limit': { value: 'NAME', text: "the limit header's name with --response-headers envoy", fallback: 'RateLimit-Limit' },
  'header-remaining': { value: 'NAME', text: "the remaining header's name", fallback: 'RateLimit-Remaining' },
  'header-reset': { value: 'NAME', text: "the reset header's name", fallback: 'RateLimit-Reset' },
  'response-dynamic-metadata': { text: "answers carry dynamic_metadata (envoy's RESPONSE_DYNAMIC_METADATA)" },
  'shadow-mode': { text: "never answer OVER_LIMIT overall (envoy's SHADOW_MODE)" },
  'quota-mode': { text: "every limit in quota mode (envoy's QUOTA_MODE)" },
  'failure-mode': { value: 'MODE', text: 'when the store fails: local (limit / --expected-nodes per node), open or closed', fallback: 'local' },
  'expected-nodes': { value: 'N', text: 'nodes sharing the store, for --failure-mode local', fallback: '1' },
  'deadline-ms': { value: 'MS', text: 'longest wait for the store per check, in ms', fallback: '50' },
  'fail-closed-status': { value: 'S', text: 'how closed refuses: 429 (OVER_LIMIT) or 503 (UNAVAILABLE)', fallback: '429' },
  'local-cache-keys': { value: 'N', text: 'denied keys this node answers itself until their retry time (0: off)', fallback: '100000' },
  'drain-delay': { value: 'D', text: 'on SIGTERM, /readyz says draining and requests are served this long', fallback: '5s' },
  'shutdown-timeout': { value: 'D', text: 'then in-flight requests get this long to finish', fallback: '10s' },
  'keep-alive-timeout': { value: 'D', text: 'idle keep-alive connections closed after (above an ALB\'s 60 s)', fallback: '65s' },
  'headers-timeout': { value: 'D', text: 'headers within; a connection silent this long is closed', fallback: '5s' },
  'request-timeout': { value: 'D', text: 'a whole request within', fallback: '10s' },
  'max-requests-per-socket': { value: 'N', text: 'requests per connection (0: no cap)', fallback: '0' },
  'grpc-idle-timeout': { value: 'D', text: 'gRPC: GOAWAY to a connection with no call this long (0: never)', fallback: '5m' },
  'grpc-max-connection-age': { value: 'D', text: '... to any connection this old (0: never)', fallback: '24h' },
  'grpc-max-connection-age-grace': { value: 'D', text: '... cut this long after', fallback: '1h' },
  'grpc-receive-timeout': { value: 'D', text: "a call's request within, else DEADLINE_EXCEEDED", fallback: '10s' },
  'grpc-max-concurrent-streams': { value: 'N', text: 'gRPC calls per connection', fallback: '100' },
  'grpc-max-connections': { value: 'N', text: 'gRPC connections at once', fallback: '10000' },
  'max-keys': { value: 'N', text: 'keys the memory store holds, least recently used evicted (not with Redis)', fallback: '1000000' },
  settings: { value: 'FILE', text: 'YAML/JSON of these settings by flag name (flags and variables win)' },
  'address-file': { value: 'FILE', text: "once listening, the listeners' URLs as JSON there, for tollgate health" },
};

/** The gateway's own flags, and those whose meaning differs from serve's. */
export const GATEWAY_FLAG_TEXT: Readonly<Record<string, FlagText>> = {
  ...SERVICE_FLAG_TEXT,
  config: { value: 'FILE', text: "routes, upstreams, rules (YAML, envoy's route config shape); reloaded live" },
  rules: { value: 'FILE|DIR', text: "the rules (overrides the file's rules:)" },
  port: { value: 'N', text: "where the proxy listens (else the file's listen)", fallback: '8888' },
  'admin-port': { value: 'N', text: '/metrics, /dashboard, /readyz, /v1/rules, admin API', fallback: '9901' },
};

export const REPLICATE_FLAG_TEXT: Readonly<Record<string, FlagText>> = {
  region: { value: 'NAME', text: "this region (the regionStore's region)" },
  redis: { value: 'URL', text: "this region's own Redis" },
  peer: { value: 'NAME=URL', text: 'another region and its Redis; repeat for each' },
  'interval-ms': { value: 'MS', text: 'how often changes are sent', fallback: '50' },
  'key-prefix': { value: 'PREFIX', text: "the stores' key prefix", fallback: 'tollgate:' },
};

export const SIMULATE_FLAG_TEXT: Readonly<Record<string, FlagText>> = {
  rules: { value: 'FILE|DIR', text: 'the rules (as serve --config)' },
  log: { value: 'FILE', text: 'the access log: Common/Combined Log Format or JSON lines' },
  format: { value: 'F', text: 'clf, combined or jsonl', fallback: 'from the first line' },
  field: { value: 'NAME=MEMBER', text: 'JSON lines: read field NAME from MEMBER (a.b for nested)' },
  domain: { value: 'D', text: 'a domain to check each line against (repeat)', fallback: 'all' },
  descriptor: { value: 'KEY=FIELD', text: 'an entry of that descriptor (repeat)', fallback: 'remote_address=ip' },
  map: { value: 'FILE', text: 'YAML: several requests per line, literal values, when:' },
  algorithm: { value: 'A[,B...]', text: 'replay once per algorithm, every limit on it, side by side' },
  'compare-to': { value: 'A', text: "count per limit the decisions that differ from A's" },
  top: { value: 'N', text: 'busiest keys per limit', fallback: '10' },
  json: { text: 'the report as JSON on stdout' },
  html: { value: 'FILE', text: 'also write a self-contained HTML report with charts' },
  strict: { text: 'stop at the first malformed line (exit 1)' },
};

export const VALIDATE_FLAG_TEXT: Readonly<Record<string, FlagText>> = {
  'merge-domains': { text: "as serve's: one domain across several files is merged" },
};
