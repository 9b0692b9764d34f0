/**
 * The dashboard page: one HTML document with its CSS and script inline, no external URL and no
 * build step. The script listens to GET /v1/events (one snapshot a second) and draws the charts on
 * <canvas> itself. Every value from the server is put in the page with textContent, never as HTML.
 * The style and the script are kept apart so the server can allow exactly them by hash (CSP).
 *
 * For tests and scripts, the live numbers are also on the elements: `data-value` on the counters,
 * `data-rule` on the rules table's rows, and `data-*` on the chart's canvas (what it last drew).
 */

export const DASHBOARD_STYLE = `
:root { color-scheme: light dark; --bg: #f6f7f9; --panel: #fff; --ink: #1d2330; --muted: #677085; --line: #e1e4ea;
  --ok: #2e9e5b; --bad: #d9453b; --warn: #d8921a; --shadow: #7a5bd6; --accent: #2f6fde; }
@media (prefers-color-scheme: dark) { :root { --bg: #12151b; --panel: #1b2029; --ink: #e6e9ef; --muted: #98a2b5; --line: #2c3340; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--ink); }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 12px 20px; padding: 14px 20px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { font-size: 18px; margin: 0; letter-spacing: .02em; }
.pill { display: inline-block; padding: 2px 10px; border-radius: 999px; font-size: 12px; font-weight: 600; background: var(--line); }
.pill.live { background: var(--ok); color: #fff; }
.pill.down { background: var(--bad); color: #fff; }
.pill.warn { background: var(--warn); color: #fff; }
.meta { color: var(--muted); font-size: 12px; }
.meta b { color: var(--ink); font-weight: 600; font-family: ui-monospace, Menlo, Consolas, monospace; }
main { padding: 16px 20px 32px; display: grid; align-items: start; gap: 16px; grid-template-columns: repeat(12, 1fr); }
section { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; min-width: 0; }
section h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 0 0 10px; font-weight: 600; }
.cards { grid-column: 1 / -1; display: grid; gap: 12px; grid-template-columns: repeat(auto-fit, minmax(140px, 1fr)); background: none; border: 0; padding: 0; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 26px; font-weight: 650; font-variant-numeric: tabular-nums; margin-top: 2px; }
.card .sub { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.card.bad .value { color: var(--bad); } .card.ok .value { color: var(--ok); } .card.warn .value { color: var(--warn); } .card.shadow .value { color: var(--shadow); }
.chart { grid-column: 1 / -1; }
.chart-head { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 16px; margin-bottom: 8px; }
.chart-head h2 { margin: 0; }
.legend { display: flex; gap: 14px; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.legend .a { background: var(--ok); } .legend .t { background: var(--bad); }
select { font: inherit; padding: 3px 6px; border-radius: 6px; border: 1px solid var(--line); background: var(--panel); color: var(--ink); max-width: 100%; }
#chart { width: 100%; height: 260px; display: block; }
.rules { grid-column: 1 / -1; overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: right; padding: 6px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
th:first-child, td:first-child { text-align: left; }
td.rule { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; max-width: 420px; overflow: hidden; text-overflow: ellipsis; }
tbody tr { cursor: pointer; }
tbody tr:hover, tbody tr.selected { background: color-mix(in srgb, var(--accent) 10%, transparent); }
td.t { color: var(--bad); } td.n { color: var(--warn); } td.s { color: var(--shadow); }
canvas.spark { width: 140px; height: 24px; display: block; margin-left: auto; }
.half { grid-column: span 6; } .third { grid-column: span 4; }
@media (max-width: 900px) { .half, .third { grid-column: 1 / -1; } }
ol { margin: 0; padding-left: 22px; }
ol li { padding: 3px 0; font-variant-numeric: tabular-nums; display: flex; gap: 10px; justify-content: space-between; }
ol li code { font-size: 12px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; min-width: 0; }
ol li span { color: var(--bad); flex: none; }
dl { display: grid; grid-template-columns: auto 1fr; gap: 4px 14px; margin: 0; }
dt { color: var(--muted); } dd { margin: 0; font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.empty { color: var(--muted); font-style: italic; }
h2.gap { margin-top: 18px; }
.error { color: var(--bad); }
`;

export const DASHBOARD_SCRIPT = `
(function () {
  'use strict';
  var POINTS = 120;
  var ALL = '';
  var state = { times: [], series: new Map(), selected: ALL, lastT: 0, lastSnapshotAt: 0, snapshots: 0, ruleOptions: '' };

  function $(id) { return document.getElementById(id); }
  function fmt(n) {
    if (n === undefined || n === null) return '-';
    if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
    if (Math.abs(n) >= 1e4) return (n / 1e3).toFixed(n >= 1e5 ? 0 : 1) + 'k';
    return String(Math.round(n * 10) / 10);
  }
  function setValue(id, n, text) {
    var el = $(id);
    el.textContent = text === undefined ? fmt(n) : text;
    el.setAttribute('data-value', String(n));
  }
  function setText(id, text) { $(id).textContent = text; }
  function duration(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  }
  function zeros(n) { var a = new Array(n); for (var i = 0; i < n; i++) a[i] = 0; return a; }
  function series(name) {
    var s = state.series.get(name);
    if (!s) {
      var n = state.times.length;
      s = { allowed: zeros(n), throttled: zeros(n), shadow: zeros(n), near: zeros(n) };
      state.series.set(name, s);
    }
    return s;
  }

  // One second of counts into the chart's history.
  function ingest(second) {
    if (second.t <= state.lastT) return;
    state.lastT = second.t;
    var byRule = new Map();
    byRule.set(ALL, [second.allowed, second.throttled, second.shadow, second.near]);
    for (var i = 0; i < second.rules.length; i++) {
      var r = second.rules[i];
      byRule.set(r[0], [r[1], r[2], r[3], r[4]]);
      series(r[0]);
    }
    series(ALL);
    state.times.push(second.t);
    state.series.forEach(function (s, name) {
      var c = byRule.get(name) || [0, 0, 0, 0];
      s.allowed.push(c[0]); s.throttled.push(c[1]); s.shadow.push(c[2]); s.near.push(c[3]);
    });
    if (state.times.length > POINTS) {
      state.times.shift();
      state.series.forEach(function (s) { s.allowed.shift(); s.throttled.shift(); s.shadow.shift(); s.near.shift(); });
    }
  }

  // Forget rules that are neither listed nor active in the window (bounded memory).
  function prune(listed) {
    state.series.forEach(function (s, name) {
      if (name === ALL || listed.has(name)) return;
      var sum = 0;
      for (var i = 0; i < s.allowed.length; i++) sum += s.allowed[i] + s.throttled[i];
      if (sum === 0) state.series.delete(name);
    });
    if (!state.series.has(state.selected)) state.selected = ALL;
  }

  function niceMax(v) {
    if (v <= 4) return 4;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  function colors() {
    var cs = getComputedStyle(document.documentElement);
    function v(name) { return cs.getPropertyValue(name).trim(); }
    return { ok: v('--ok'), bad: v('--bad'), line: v('--line'), muted: v('--muted'), ink: v('--ink') };
  }

  function fitCanvas(canvas) {
    var dpr = window.devicePixelRatio || 1;
    var w = Math.max(1, Math.round(canvas.clientWidth * dpr));
    var h = Math.max(1, Math.round(canvas.clientHeight * dpr));
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    var g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, canvas.clientWidth, canvas.clientHeight);
    return g;
  }

  // Stacked bars per second: allowed (green) under throttled (red), newest on the right.
  function drawChart() {
    var canvas = $('chart');
    var s = state.series.get(state.selected) || series(ALL);
    var g = fitCanvas(canvas);
    var c = colors();
    var W = canvas.clientWidth, H = canvas.clientHeight;
    var left = 44, right = 10, top = 10, bottom = 24;
    var pw = W - left - right, ph = H - top - bottom;
    var peak = 0, sumA = 0, sumT = 0;
    for (var i = 0; i < s.allowed.length; i++) {
      peak = Math.max(peak, s.allowed[i] + s.throttled[i]);
      sumA += s.allowed[i]; sumT += s.throttled[i];
    }
    var max = niceMax(peak);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    g.textAlign = 'right';
    g.lineWidth = 1;
    for (var k = 0; k <= 4; k++) {
      var y = Math.round(top + ph - (ph * k) / 4) + 0.5;
      g.strokeStyle = c.line;
      g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
      g.fillStyle = c.muted;
      g.fillText(fmt((max * k) / 4), left - 6, y);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    var marks = [120, 90, 60, 30, 0];
    for (var m = 0; m < marks.length; m++) {
      var x = left + pw - (marks[m] / POINTS) * pw;
      g.fillText(marks[m] === 0 ? 'now' : '-' + marks[m] + 's', Math.min(Math.max(x, left + 12), left + pw - 12), top + ph + 6);
    }
    var slot = pw / POINTS;
    var bw = Math.max(1, slot - 1);
    var n = s.allowed.length;
    for (var j = 0; j < n; j++) {
      var bx = left + pw - (n - j) * slot;
      var ha = (s.allowed[j] / max) * ph;
      var ht = (s.throttled[j] / max) * ph;
      if (ha > 0) { g.fillStyle = c.ok; g.fillRect(bx, top + ph - ha, bw, ha); }
      if (ht > 0) { g.fillStyle = c.bad; g.fillRect(bx, top + ph - ha - ht, bw, ht); }
    }
    canvas.setAttribute('data-rule', state.selected === ALL ? 'all' : state.selected);
    canvas.setAttribute('data-points', String(n));
    canvas.setAttribute('data-max', String(max));
    canvas.setAttribute('data-allowed-sum', String(sumA));
    canvas.setAttribute('data-throttled-sum', String(sumT));
    canvas.setAttribute('data-last-allowed', String(n > 0 ? s.allowed[n - 1] : 0));
    canvas.setAttribute('data-last-throttled', String(n > 0 ? s.throttled[n - 1] : 0));
    canvas.setAttribute('data-draws', String(Number(canvas.getAttribute('data-draws') || 0) + 1));
  }

  function drawSpark(canvas, s) {
    var g = fitCanvas(canvas);
    var c = colors();
    var W = canvas.clientWidth, H = canvas.clientHeight;
    var n = s.allowed.length, peak = 1;
    for (var i = 0; i < n; i++) peak = Math.max(peak, s.allowed[i] + s.throttled[i]);
    var slot = W / POINTS;
    for (var j = 0; j < n; j++) {
      var x = W - (n - j) * slot;
      var ha = (s.allowed[j] / peak) * H, ht = (s.throttled[j] / peak) * H;
      if (ha > 0) { g.fillStyle = c.ok; g.fillRect(x, H - ha, Math.max(1, slot), ha); }
      if (ht > 0) { g.fillStyle = c.bad; g.fillRect(x, H - ha - ht, Math.max(1, slot), ht); }
    }
  }

  function cell(tr, text, cls, value) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    if (value !== undefined) td.setAttribute('data-value', String(value));
    tr.appendChild(td);
    return td;
  }

  function renderRules(rules) {
    var body = $('rules-body');
    body.textContent = '';
    if (rules.length === 0) {
      var tr0 = document.createElement('tr');
      var td0 = cell(tr0, 'No limited traffic yet.', 'empty');
      td0.colSpan = 8;
      body.appendChild(tr0);
      return;
    }
    var n = state.times.length;
    for (var i = 0; i < rules.length; i++) {
      var r = rules[i];
      var s = series(r.rule);
      var tr = document.createElement('tr');
      tr.setAttribute('data-rule', r.rule);
      if (r.rule === state.selected) tr.className = 'selected';
      var name = cell(tr, r.rule, 'rule');
      name.title = r.rule;
      cell(tr, fmt(n ? s.allowed[n - 1] : 0), 'a', n ? s.allowed[n - 1] : 0).setAttribute('data-col', 'allowed-per-second');
      cell(tr, fmt(n ? s.throttled[n - 1] : 0), 't', n ? s.throttled[n - 1] : 0).setAttribute('data-col', 'throttled-per-second');
      cell(tr, fmt(r.allowed), '', r.allowed).setAttribute('data-col', 'allowed');
      cell(tr, fmt(r.throttled), 't', r.throttled).setAttribute('data-col', 'throttled');
      cell(tr, fmt(r.near), 'n', r.near).setAttribute('data-col', 'near');
      cell(tr, fmt(r.shadow), 's', r.shadow).setAttribute('data-col', 'shadow');
      var sparkCell = cell(tr, '', '');
      var spark = document.createElement('canvas');
      spark.className = 'spark';
      sparkCell.appendChild(spark);
      tr.addEventListener('click', select.bind(null, r.rule));
      body.appendChild(tr);
      drawSpark(spark, s);
    }
  }

  function renderList(id, items, label, count, empty) {
    var ol = $(id);
    ol.textContent = '';
    if (items.length === 0) {
      var li0 = document.createElement('li');
      li0.className = 'empty';
      li0.textContent = empty;
      ol.appendChild(li0);
      return;
    }
    for (var i = 0; i < items.length; i++) {
      var li = document.createElement('li');
      var code = document.createElement('code');
      code.textContent = label(items[i]);
      code.title = label(items[i]);
      var span = document.createElement('span');
      span.textContent = fmt(count(items[i]));
      li.setAttribute('data-value', String(count(items[i])));
      li.appendChild(code);
      li.appendChild(span);
      ol.appendChild(li);
    }
  }

  function renderSelect() {
    var names = [ALL];
    state.series.forEach(function (_s, name) { if (name !== ALL) names.push(name); });
    names.sort();
    var signature = names.join('\\n');
    if (signature === state.ruleOptions) return;
    state.ruleOptions = signature;
    var sel = $('rule-select');
    sel.textContent = '';
    for (var i = 0; i < names.length; i++) {
      var o = document.createElement('option');
      o.value = names[i];
      o.textContent = names[i] === ALL ? 'All rules' : names[i];
      sel.appendChild(o);
    }
    sel.value = state.selected;
  }

  function select(rule) {
    state.selected = rule;
    $('rule-select').value = rule;
    var rows = $('rules-body').querySelectorAll('tr');
    for (var i = 0; i < rows.length; i++) rows[i].className = rows[i].getAttribute('data-rule') === rule ? 'selected' : '';
    drawChart();
  }

  function dl(id, pairs) {
    var el = $(id);
    el.textContent = '';
    for (var i = 0; i < pairs.length; i++) {
      var dt = document.createElement('dt');
      dt.textContent = pairs[i][0];
      var dd = document.createElement('dd');
      dd.textContent = pairs[i][1];
      if (pairs[i][2]) dd.className = pairs[i][2];
      el.appendChild(dt);
      el.appendChild(dd);
    }
  }

  function render(snap) {
    var sec = snap.second, tot = snap.totals;
    setValue('rate-checks', sec.checks);
    setValue('rate-allowed', sec.allowed);
    setValue('rate-throttled', sec.throttled);
    setValue('checks-total', tot.checks);
    setValue('allowed-total', tot.allowed);
    setValue('throttled-total', tot.throttled);
    setValue('near-total', tot.near);
    setValue('near-rate', sec.near, fmt(sec.near) + '/s');
    setValue('shadow-total', tot.shadow);
    setValue('shadow-rate', sec.shadow, fmt(sec.shadow) + '/s');
    setValue('rejected-total', tot.rejected);
    setValue('store-errors-total', tot.storeErrors);

    var info = snap.rulesInfo;
    setText('rules-version', info.version.length > 12 ? info.version.slice(0, 12) : info.version);
    $('rules-version').title = info.version;
    $('rules-version').setAttribute('data-value', info.version);
    var rulesPairs = [['Version', info.version], ['Domains', info.domains.join(', ') || '(none)'], ['Limits', String(info.rules)]];
    if (info.watcher) {
      rulesPairs.push(['File reloads', info.watcher.reloads + ' applied, ' + info.watcher.failures + ' refused']);
      if (info.watcher.lastError) rulesPairs.push(['Refused', info.watcher.lastError, 'error']);
    }
    if (info.sync) {
      rulesPairs.push(['Pushed version', String(info.sync.version)]);
      rulesPairs.push(['Pushes', info.sync.applied + ' applied, ' + info.sync.refused + ' refused']);
      if (info.sync.lastError) rulesPairs.push(['Refused', info.sync.lastError, 'error']);
    }
    dl('rules-info', rulesPairs);

    var st = snap.store;
    var stateEl = $('store-state');
    stateEl.textContent = st.state;
    stateEl.setAttribute('data-value', st.state);
    stateEl.className = 'value';
    $('store-card').className = 'card ' + (st.state === 'ok' ? 'ok' : st.state === 'unknown' ? '' : 'bad');
    setText('store-name', st.name + (st.keys !== undefined ? ' - ' + fmt(st.keys) + ' keys' : ''));
    var fb = st.fallback;
    var fbText = fb === null ? 'none configured' : typeof fb === 'object' ? JSON.stringify(fb) : String(fb);
    var fbEl = $('fallback-state');
    fbEl.textContent = fbText;
    fbEl.setAttribute('data-value', fbText);
    var storePairs = [['Store', st.name], ['State', st.state, st.state === 'ok' ? '' : 'error']];
    if (st.reachable !== undefined) storePairs.push(['Reachable', st.reachable ? 'yes' : 'no', st.reachable ? '' : 'error']);
    if (st.keys !== undefined) {
      storePairs.push(['Keys', fmt(st.keys) + ' of ' + fmt(st.maxKeys)]);
      storePairs.push(['Evictions', fmt(st.evictions)]);
      storePairs.push(['Expired', fmt(st.expired)]);
    }
    storePairs.push(['Errors', st.errorsTotal + ' (' + st.errorsLast10s + ' in the last 10 s)', st.errorsLast10s > 0 ? 'error' : '']);
    if (st.lastError) storePairs.push(['Last error', st.lastError.kind + ' at ' + new Date(st.lastError.at).toLocaleTimeString(), 'error']);
    storePairs.push(['Fallback', fbText]);
    storePairs.push(['Ready', snap.ready === undefined ? 'checking' : snap.ready ? 'yes' : 'no', snap.ready === false ? 'error' : '']);
    dl('store-info', storePairs);

    setText('uptime', duration(snap.uptimeMs));
    setText('clients', String(snap.clients));
    renderList('top-keys', snap.topKeys, function (k) { return k.key; }, function (k) { return k.throttled; }, 'Nothing throttled yet.');
    renderList('top-rules', snap.topRules, function (r) { return r.rule; }, function (r) { return r.throttled; }, 'Nothing throttled yet.');

    var listed = new Set();
    for (var i = 0; i < snap.rules.length; i++) listed.add(snap.rules[i].rule);
    prune(listed);
    renderRules(snap.rules);
    renderSelect();
    drawChart();
    state.snapshots += 1;
    document.body.setAttribute('data-snapshots', String(state.snapshots));
  }

  function connection(text, cls) {
    var el = $('connection');
    el.textContent = text;
    el.className = 'pill ' + cls;
    el.setAttribute('data-value', text);
  }

  $('rule-select').addEventListener('change', function (e) { select(e.target.value); });
  window.addEventListener('resize', drawChart);

  var source = new EventSource('/v1/events');
  source.addEventListener('open', function () { connection('live', 'live'); });
  source.addEventListener('error', function () {
    connection(source.readyState === 2 ? 'disconnected' : 'reconnecting', 'down');
  });
  source.addEventListener('history', function (e) {
    state.times = [];
    state.series = new Map();
    state.lastT = 0;
    var seconds = JSON.parse(e.data);
    for (var i = 0; i < seconds.length; i++) ingest(seconds[i]);
    drawChart();
  });
  source.addEventListener('snapshot', function (e) {
    var snap = JSON.parse(e.data);
    ingest(snap.second);
    state.lastSnapshotAt = Date.now();
    connection('live', 'live');
    render(snap);
  });
  // No snapshot for a while although connected: say so rather than show stale numbers as live.
  setInterval(function () {
    if (source.readyState === 1 && state.lastSnapshotAt > 0 && Date.now() - state.lastSnapshotAt > 3500) connection('stalled', 'warn');
  }, 1000);
  drawChart();
})();
`;

const BODY = `
<header>
  <h1>Tollgate</h1>
  <span id="connection" class="pill" data-value="connecting">connecting</span>
  <span class="meta">rules <b id="rules-version">-</b></span>
  <span class="meta">uptime <b id="uptime">-</b></span>
  <span class="meta">viewers <b id="clients">-</b></span>
</header>
<main>
  <section class="cards" aria-label="Counters">
    <div class="card"><div class="label">Checks / s</div><div class="value" id="rate-checks">-</div><div class="sub">total <span id="checks-total">-</span></div></div>
    <div class="card ok"><div class="label">Allowed / s</div><div class="value" id="rate-allowed">-</div><div class="sub">total <span id="allowed-total">-</span></div></div>
    <div class="card bad"><div class="label">Throttled / s</div><div class="value" id="rate-throttled">-</div><div class="sub">total <span id="throttled-total">-</span></div></div>
    <div class="card warn"><div class="label">Near limit (&le; 20% left)</div><div class="value" id="near-total">-</div><div class="sub" id="near-rate">-</div></div>
    <div class="card shadow"><div class="label">Shadow-mode hits</div><div class="value" id="shadow-total">-</div><div class="sub" id="shadow-rate">-</div></div>
    <div class="card"><div class="label">Malformed requests</div><div class="value" id="rejected-total">-</div><div class="sub">store errors <span id="store-errors-total">-</span></div></div>
    <div class="card" id="store-card"><div class="label">Store</div><div class="value" id="store-state">-</div><div class="sub" id="store-name">-</div><div class="sub">fallback: <span id="fallback-state">-</span></div></div>
  </section>
  <section class="chart">
    <div class="chart-head">
      <h2>Allowed vs throttled per second</h2>
      <select id="rule-select" aria-label="Rule shown in the chart"><option value="">All rules</option></select>
      <span class="legend"><span><i class="a"></i>allowed</span><span><i class="t"></i>throttled</span></span>
    </div>
    <canvas id="chart" role="img" aria-label="Allowed and throttled decisions per second, last two minutes"></canvas>
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
  <section class="third"><h2>Rules</h2><dl id="rules-info"></dl><h2 class="gap">Store</h2><dl id="store-info"></dl></section>
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
