// The wrk Lua script of the decision-service benchmarks (bench/service.js, bench/service-half-load.js).

/**
 * The wrk Lua script: POST /json with a RateLimitRequest whose remote_address cycles over
 * `addresses` values (each thread starting at its own offset), the same value in X-Addr for nginx.
 * `fixed`: always that address. `meanDelayMs`: pace each connection (uniform random delay in
 * [0, 2·mean] before each request).
 */
export function envoyWrkScript({ addresses = 100_000, fixed, meanDelayMs, threads = 2, offset = 0 }) {
  return `
local N = ${addresses}
local threads = 0
counter = 0
function setup(thread)
  thread:set("offset", ${offset} + threads * math.floor(N / ${threads}))
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  math.randomseed(1000 + tid * 7919)
end
local floor = math.floor
local headers = { ["Content-Type"] = "application/json" }
function request()
  local ip
  ${
    fixed !== undefined
      ? `ip = "${fixed}"`
      : `local n = (offset + counter) % N
  counter = counter + 1
  ip = "10." .. floor(n / 65536) .. "." .. (floor(n / 256) % 256) .. "." .. (n % 256)`
  }
  headers["X-Addr"] = ip
  return wrk.format("POST", "/json", headers, '{"domain":"per_ip","descriptors":[{"entries":[{"key":"remote_address","value":"' .. ip .. '"}]}]}')
end
${meanDelayMs !== undefined ? `function delay()\n  return math.random() * ${2 * meanDelayMs}\nend` : ''}
`;
}

