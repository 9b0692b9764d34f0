/**
 * The report as one self-contained HTML page: no script, no CDN, nothing fetched (a strict CSP
 * says so). Per run and limit: the counts, an inline SVG chart of allowed and throttled over time
 * (a bar per bucket, throttled stacked on allowed, each with a tooltip) and the busiest keys.
 */
import type { LogSummary } from './render-text.js';
import type { RuleReport, SimulationReport, SimulationRun, TimeBucket, TopKey } from './types.js';

const CHART_WIDTH = 720;
const CHART_HEIGHT = 160;
const STYLE = `body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:70em}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1em;font-family:monospace}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .6em;border-bottom:1px solid #eee;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.throttled{color:#b00020}.rule{margin:1.5em 0}
svg .allowed{fill:#4caf50}svg .throttled{fill:#d32f2f}svg text{font-size:11px;fill:#555}.legend span{margin-right:1em}
.keys{display:flex;gap:3em;flex-wrap:wrap;align-items:flex-start}`;

/** Renders the report as a complete HTML document. */
export function renderHtml(report: SimulationReport, log: LogSummary | undefined): string {
  const title = `tollgate simulate${log === undefined ? '' : `: ${log.file}`}`;
  const body = [
    `<h1>${escape(title)}</h1>`,
    `<p id="summary">${report.entries} requests replayed${report.start === undefined ? '' : `, ${time(report.start)} → ${time(report.end!)} UTC`}${
      log === undefined ? '' : `; ${log.lines} lines, ${log.malformed} malformed`
    }${report.outOfOrder > 0 ? `; ${report.outOfOrder} out of order` : ''}.</p>`,
    summaryTable(report),
    ...report.runs.map((run) => runSection(run, report.compareTo)),
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title><style>${STYLE}</style></head>
<body>
${body.join('\n')}
</body></html>
`;
}

/** Every limit in every run, one row each: the side-by-side view when algorithms are compared. */
function summaryTable(report: SimulationReport): string {
  const compared = report.compareTo !== undefined;
  const head = `<tr><th>rule</th><th>limit</th><th>algorithm</th><th>requests</th><th>allowed</th><th>throttled</th>${compared ? `<th>allowed only here / only by ${escape(report.compareTo!)}</th>` : ''}</tr>`;
  const rows = report.runs.flatMap((run) =>
    run.rules.map((rule) => {
      const difference = rule.difference === undefined ? '' : `<td class="n">${rule.difference.allowedOnlyHere} / ${rule.difference.allowedOnlyByReference}</td>`;
      return `<tr><td>${escape(rule.rule)}</td><td>${escape(rule.limit)}</td><td>${escape(rule.algorithm)}</td><td class="n">${rule.requests}</td><td class="n">${rule.allowed}</td><td class="n throttled">${rule.throttled}</td>${difference}</tr>`;
    }),
  );
  return `<table id="overview">${head}${rows.join('')}</table>`;
}

function runSection(run: SimulationRun, compareTo: string | undefined): string {
  const name = run.algorithm === 'rules' ? "the rules' own algorithms" : run.algorithm;
  return `<section class="run" data-algorithm="${escape(run.algorithm)}">
<h2>Run: ${escape(name)}</h2>
<p>${run.requests} checks: ${run.allowed} allowed, <span class="throttled">${run.throttled} throttled</span>.</p>
${run.rules.map((rule) => ruleSection(rule, compareTo)).join('\n')}
</section>`;
}

function ruleSection(rule: RuleReport, compareTo: string | undefined): string {
  const difference = rule.difference === undefined || compareTo === undefined
    ? ''
    : `<tr><th>allowed here, throttled by ${escape(compareTo)}</th><td class="n">${rule.difference.allowedOnlyHere}</td></tr><tr><th>throttled here, allowed by ${escape(compareTo)}</th><td class="n">${rule.difference.allowedOnlyByReference}</td></tr>`;
  return `<div class="rule" data-rule="${escape(rule.rule)}">
<h3>${escape(rule.rule)}${rule.shadowMode ? ' (shadow mode)' : ''}</h3>
<table class="counts"><tr><th>limit</th><td>${escape(rule.limit)}, ${escape(rule.algorithm)}</td></tr>
<tr><th>requests</th><td class="n">${rule.requests}</td></tr><tr><th>allowed</th><td class="n">${rule.allowed}</td></tr>
<tr><th>throttled</th><td class="n throttled">${rule.throttled}</td></tr><tr><th>distinct keys</th><td class="n">${rule.keys}</td></tr>${difference}</table>
${chart(rule)}
<div class="keys">${keyTable('Busiest keys', rule.topByRequests)}${keyTable('Most throttled keys', rule.topByThrottled)}</div>
</div>`;
}

/** Stacked bars, one per bucket, scaled to the busiest bucket. */
function chart(rule: RuleReport): string {
  const { bucketMs, buckets } = rule.timeline;
  if (buckets.length === 0) return '';
  const plotHeight = CHART_HEIGHT - 20;
  const highest = Math.max(1, ...buckets.map((bucket) => bucket.allowed + bucket.throttled));
  const width = CHART_WIDTH / buckets.length;
  const bars = buckets.map((bucket, i) => bar(bucket, i * width, width, plotHeight / highest, plotHeight, bucketMs)).join('');
  const throttledSum = buckets.reduce((sum, bucket) => sum + bucket.throttled, 0);
  return `<p class="legend"><span style="color:#4caf50">■ allowed</span><span style="color:#d32f2f">■ throttled</span>per ${escape(String(bucketMs / 60_000))} min, highest ${highest}</p>
<svg class="timeline" role="img" aria-label="allowed and throttled over time for ${escape(rule.rule)}" data-buckets="${buckets.length}" data-throttled-sum="${throttledSum}" width="${CHART_WIDTH}" height="${CHART_HEIGHT}" viewBox="0 0 ${CHART_WIDTH} ${CHART_HEIGHT}">
${bars}<text x="0" y="${CHART_HEIGHT - 4}">${time(buckets[0]!.start)}</text><text x="${CHART_WIDTH}" y="${CHART_HEIGHT - 4}" text-anchor="end">${time(buckets.at(-1)!.start + bucketMs)}</text></svg>`;
}

function bar(bucket: TimeBucket, x: number, width: number, scale: number, bottom: number, bucketMs: number): string {
  const allowedHeight = bucket.allowed * scale;
  const throttledHeight = bucket.throttled * scale;
  const tip = `<title>${time(bucket.start)} +${bucketMs / 60_000} min: ${bucket.allowed} allowed, ${bucket.throttled} throttled</title>`;
  const w = Math.max(width - 1, 0.5).toFixed(2);
  return `<g>${tip}<rect class="allowed" x="${x.toFixed(2)}" y="${(bottom - allowedHeight).toFixed(2)}" width="${w}" height="${allowedHeight.toFixed(2)}"/>`
    + `<rect class="throttled" x="${x.toFixed(2)}" y="${(bottom - allowedHeight - throttledHeight).toFixed(2)}" width="${w}" height="${throttledHeight.toFixed(2)}"/></g>`;
}

function keyTable(title: string, keys: readonly TopKey[]): string {
  // Space-Saving counts are never low; a key that took over a slot may be `error` high.
  const rows = keys.map((key) => `<tr><td>${escape(key.key)}</td><td class="n">${key.error > 0 ? `${key.count - key.error}–${key.count}` : key.count}</td></tr>`).join('');
  return `<table class="top"><caption>${escape(title)}</caption><tr><th>key</th><th>count</th></tr>${rows}</table>`;
}

function time(ms: number): string {
  return new Date(ms).toISOString().slice(0, 16).replace('T', ' ');
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
