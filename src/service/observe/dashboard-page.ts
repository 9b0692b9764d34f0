/**
 * The dashboard page: one HTML document with its CSS and script inline, no external URL and no
 * build step. The script listens to GET /v1/events (one snapshot a second) and draws the charts on
 * <canvas> itself. Every value from the server is put in the page with textContent, never as HTML.
 * The style and the script are kept apart so the server can allow exactly them by hash (CSP).
 *
 * The style and the script live in assets/ as plain files (so ESLint checks the script); the build
 * copies them next to this module, and they are read once, when this module loads.
 *
 * For tests and scripts, the live numbers are also on the elements: `data-value` on the counters,
 * `data-rule` on the rules table's rows, and `data-*` on the chart's canvas (what it last drew).
 */
import { readFileSync } from 'node:fs';

function readAsset(name: string): string {
  return readFileSync(new URL(`./assets/${name}`, import.meta.url), 'utf8');
}

/**
 * The page's style and script, exactly as inlined: what the CSP hashes cover. Each starts on the
 * line after its tag, as the page always had it (so the page, and its hashes, are unchanged).
 */
export const DASHBOARD_STYLE = `\n${readAsset('dashboard.css')}`;
export const DASHBOARD_SCRIPT = `\n${readAsset('dashboard.js')}`;

const BODY = `
<header>
  <h1>Tollgate</h1>
  <span id="connection" class="pill" data-value="connecting">connecting</span>
  <span id="breaker" class="pill breaker" data-value="" title="The circuit breaker around the store: closed, the store decides; open, the failure modes decide; half-open, probing">store -</span>
  <span class="meta">rules <b id="rules-version">-</b></span>
  <span class="meta">uptime <b id="uptime">-</b></span>
  <span class="meta">viewers <b id="clients">-</b></span>
</header>
<main>
  <section id="trouble" class="trouble" role="alert" hidden><b id="trouble-title">-</b> <span id="trouble-detail"></span></section>
  <section class="cards" aria-label="Counters">
    <div class="card" title="A check is one request (/json, /v1/check, gRPC, the gateway, /v1/limit), allowed or throttled as a whole"><div class="label">Checks / s (requests)</div><div class="value" id="rate-checks">-</div><div class="sub" id="checks-split">-</div><div class="sub">total <span id="checks-total">-</span></div></div>
    <div class="card ok"><div class="label">Allowed checks / s</div><div class="value" id="rate-allowed-checks">-</div><div class="sub">total <span id="allowed-checks-total">-</span></div></div>
    <div class="card bad"><div class="label">Throttled checks / s</div><div class="value" id="rate-throttled-checks">-</div><div class="sub">total <span id="throttled-checks-total">-</span></div></div>
    <div class="card" title="A decision is one limit applied to one descriptor: a check can carry several descriptors, or none that a limit applies to"><div class="label">Limit decisions / s</div><div class="value" id="rate-decisions">-</div><div class="sub">allowed <span id="rate-allowed">-</span> + over limit <span id="rate-throttled">-</span></div><div class="sub">total <span id="decisions-total">-</span> = <span id="allowed-total">-</span> + <span id="throttled-total">-</span></div></div>
    <div class="card" title="Time to decide a check (rules and store), all transports, last 10 s"><div class="label">Decision latency p50, ms</div><div class="value" id="latency-p50">-</div><div class="sub">p99 <span id="latency-p99">-</span> ms (last 10 s)</div></div>
    <div class="card ok" title="Concurrency slots granted by POST /v1/acquire (docs/concurrency.md)"><div class="label">Slots granted / s</div><div class="value" id="rate-slots-granted">-</div><div class="sub">released <span id="rate-slots-released">-</span> / s</div><div class="sub">total <span id="slots-granted-total">-</span>, released <span id="slots-released-total">-</span></div></div>
    <div class="card bad" title="POST /v1/acquire refused: the key's limit of slots was held"><div class="label">Slots refused / s</div><div class="value" id="rate-slots-refused">-</div><div class="sub">total <span id="slots-refused-total">-</span></div></div>
    <div class="card"><div class="label">/v1/limit checks / s</div><div class="value" id="rate-limit-api">-</div><div class="sub">total <span id="limit-api-total">-</span> (included in checks)</div></div>
    <div class="card" id="unknown-card" title="Checks naming a domain that is not in the rules: no limit applies. The first sign of a misconfigured Envoy."><div class="label">Unknown domain / s</div><div class="value" id="rate-unknown">-</div><div class="sub">total <span id="unknown-total">-</span> (included in checks)</div></div>
    <div class="card" title="Descriptors decided by a domain's allow or deny list, before any limit and without the store"><div class="label">Decided by lists / s</div><div class="value" id="rate-listed">-</div><div class="sub">allow list <span id="allow-listed-total">-</span> / deny list <span id="deny-listed-total">-</span> (totals)</div></div>
    <div class="card bad" title="Descriptors refused by a block: a penalty (block_duration) during its block, or a block set by hand (tollgate keys block); included in over limit"><div class="label">Blocked / s</div><div class="value" id="rate-blocked">-</div><div class="sub">total <span id="blocked-total">-</span> (included in over limit)</div><div class="sub">penalties started <span id="blocks-started-total">-</span> (total)</div></div>
    <div class="card warn"><div class="label">Near limit (&le; 20% left)</div><div class="value" id="near-total">-</div><div class="sub" id="near-rate">-</div></div>
    <div class="card shadow"><div class="label">Shadow-mode hits</div><div class="value" id="shadow-total">-</div><div class="sub" id="shadow-rate">-</div></div>
    <div class="card"><div class="label">Malformed requests</div><div class="value" id="rejected-total">-</div><div class="sub">store errors <span id="store-errors-total">-</span></div></div>
    <div class="card degraded"><div class="label">Degraded / s</div><div class="value" id="rate-degraded">-</div><div class="sub" id="degraded-reasons">-</div><div class="sub">total <span id="degraded-total">-</span></div></div>
    <div class="card degraded"><div class="label">Fallbacks / s</div><div class="value" id="rate-fallbacks">-</div><div class="sub" id="fallback-causes">-</div><div class="sub">total <span id="fallbacks-total">-</span></div></div>
    <div class="card" id="store-card"><div class="label">Store</div><div class="value" id="store-state">-</div><div class="sub" id="store-name">-</div><div class="sub" id="since-healthy" data-value="">-</div><div class="sub error" id="last-error" data-value=""></div><div class="sub">failure mode: <span id="fallback-state">-</span></div></div>
  </section>
  <section class="cards" id="waiting-rooms" aria-label="Waiting rooms" hidden></section>
  <section class="chart">
    <div class="chart-head">
      <h2>Limit decisions per second: allowed vs over limit</h2>
      <select id="rule-select" aria-label="Rule shown in the chart"><option value="">All rules</option></select>
      <span class="legend"><span><i class="a"></i>allowed</span><span><i class="t"></i>throttled</span><span><i class="d"></i>degraded (all rules)</span><span><i class="e"></i>store errors</span><span><i class="o"></i>breaker open</span><span><i class="h"></i>half-open</span></span>
      <span class="legend" id="degraded-split">-</span>
    </div>
    <canvas id="chart" role="img" aria-label="Allowed and throttled decisions per second, checks answered by a failure mode, store errors and the breaker's state, last two minutes"></canvas>
  </section>
  <section class="rules">
    <h2>Rules (busiest first; click one to chart it)</h2>
    <table id="rules-table">
      <thead><tr><th>Rule</th><th>Allowed/s</th><th>Throttled/s</th><th>Allowed</th><th>Throttled</th><th>Near limit</th><th>Shadow hits</th><th>Last 2 min</th></tr></thead>
      <tbody id="rules-body"><tr><td class="empty" colspan="8">Waiting for data...</td></tr></tbody>
    </table>
  </section>
  <section class="third"><h2>Most throttled keys</h2><ol id="top-keys"><li class="empty">Waiting for data...</li></ol></section>
  <section class="third"><h2>Most throttled rules</h2><ol id="top-rules"><li class="empty">Waiting for data...</li></ol></section>
  <section class="third"><h2>Unknown domains (checks)</h2><ol id="unknown-domains"><li class="empty">Waiting for data...</li></ol></section>
  <section class="third" title="Per-tenant overrides (PUT /v1/overrides): each outranks the rule named, until its expiry"><h2>Overrides in force (<span id="overrides-total">-</span>)</h2><ol id="overrides"><li class="empty">Waiting for data...</li></ol></section>
  <section class="third"><h2>Rules</h2><dl id="rules-info"></dl><h2 class="gap">Store</h2><dl id="store-info"></dl></section>
  <section class="workers" id="workers" hidden>
    <h2>Workers (the numbers above are their sum)</h2>
    <table><thead><tr><th>Worker</th><th>PID</th><th>Checks/s</th><th>Checks</th><th>Allowed</th><th>Throttled</th><th>Decisions</th><th>Breaker</th><th>Viewers</th></tr></thead><tbody id="workers-body"></tbody></table>
  </section>
</main>
`;

/** The whole page. */
export function dashboardHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Tollgate dashboard</title>
<link rel="icon" href="data:,">
<style>${DASHBOARD_STYLE}</style>
</head>
<body>${BODY}<script>${DASHBOARD_SCRIPT}</script>
</body>
</html>
`;
}
