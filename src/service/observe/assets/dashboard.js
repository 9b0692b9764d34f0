(function () {
  'use strict';
  var POINTS = 120;
  var ALL = '';
  var CAUSES = ['timeout', 'error', 'breaker-open', 'overload'];
  // trouble: per second, aligned with times, for all rules: degraded checks, store errors, fallbacks, breaker.
  var state = { times: [], series: new Map(), trouble: [], selected: ALL, lastT: 0, lastSnapshotAt: 0, snapshots: 0, ruleOptions: '' };

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
  // Seconds, as in "store unhealthy for 12 s".
  function secs(ms) {
    if (ms < 10000) return (Math.round(ms / 100) / 10) + ' s';
    if (ms < 60000) return Math.floor(ms / 1000) + ' s';
    return duration(ms);
  }
  function causesText(by) {
    var parts = [];
    for (var i = 0; i < CAUSES.length; i++) parts.push(CAUSES[i] + ' ' + fmt((by && by[CAUSES[i]]) || 0));
    return parts.join(', ');
  }
  function troubleOf(second) {
    return {
      degraded: second.degraded || 0, failOpen: second.failOpen || 0, failClosed: second.failClosed || 0, localFallback: second.localFallback || 0,
      storeErrors: second.storeErrors || 0, fallbacks: second.fallbacks || 0, fallbacksBy: second.fallbacksBy || {}, breaker: second.breaker || 'closed',
    };
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
    state.trouble.push(troubleOf(second));
    state.series.forEach(function (s, name) {
      var c = byRule.get(name) || [0, 0, 0, 0];
      s.allowed.push(c[0]); s.throttled.push(c[1]); s.shadow.push(c[2]); s.near.push(c[3]);
    });
    if (state.times.length > POINTS) {
      state.times.shift();
      state.trouble.shift();
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
    return {
      ok: v('--ok'), bad: v('--bad'), line: v('--line'), muted: v('--muted'), ink: v('--ink'),
      degraded: v('--degraded'), errors: v('--errors'), openBg: v('--open-bg'), halfBg: v('--half-bg'),
    };
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

  function drawAxes(g, c, geo) {
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    g.textAlign = 'right';
    g.lineWidth = 1;
    for (var k = 0; k <= 4; k++) {
      var y = Math.round(geo.top + geo.ph - (geo.ph * k) / 4) + 0.5;
      g.strokeStyle = c.line;
      g.beginPath(); g.moveTo(geo.left, y); g.lineTo(geo.left + geo.pw, y); g.stroke();
      g.fillStyle = c.muted;
      g.fillText(fmt((geo.max * k) / 4), geo.left - 6, y);
    }
    g.textAlign = 'center';
    g.textBaseline = 'top';
    var marks = [120, 90, 60, 30, 0];
    for (var m = 0; m < marks.length; m++) {
      var x = geo.left + geo.pw - (marks[m] / POINTS) * geo.pw;
      g.fillText(marks[m] === 0 ? 'now' : '-' + marks[m] + 's', Math.min(Math.max(x, geo.left + 12), geo.left + geo.pw - 12), geo.top + geo.ph + 6);
    }
  }

  // The seconds the breaker was not closed: a red (open) or amber (half-open) background.
  function drawBreaker(g, c, geo) {
    var n = state.trouble.length;
    for (var j = 0; j < n; j++) {
      var b = state.trouble[j].breaker;
      if (b === 'closed') continue;
      g.fillStyle = b === 'open' ? c.openBg : c.halfBg;
      g.fillRect(geo.left + geo.pw - (n - j) * geo.slot, geo.top, geo.slot, geo.ph);
    }
  }

  // A line over the bars, one point per second (nothing drawn while all zero).
  function drawLine(g, geo, values, color, dash) {
    var n = values.length, any = false;
    for (var i = 0; i < n; i++) if (values[i] > 0) any = true;
    if (!any) return;
    g.save();
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.setLineDash(dash);
    g.beginPath();
    for (var j = 0; j < n; j++) {
      var x = geo.left + geo.pw - (n - j) * geo.slot + geo.slot / 2;
      var y = geo.top + geo.ph - (Math.min(values[j], geo.max) / geo.max) * geo.ph;
      if (j === 0) g.moveTo(x, y); else g.lineTo(x, y);
    }
    g.stroke();
    g.restore();
  }

  function troubleSeries(field) { return state.trouble.map(function (t) { return t[field]; }); }
  function sum(values) { var total = 0; for (var i = 0; i < values.length; i++) total += values[i]; return total; }

  // Stacked bars per second: allowed (green) under throttled (red), newest on the right; over them
  // the seconds the breaker was not closed, the checks a failure mode answered and the store errors.
  function drawChart() {
    var canvas = $('chart');
    var s = state.series.get(state.selected) || series(ALL);
    var g = fitCanvas(canvas);
    var c = colors();
    var W = canvas.clientWidth, H = canvas.clientHeight;
    var geo = { left: 44, top: 10, pw: W - 44 - 10, ph: H - 10 - 24, slot: (W - 54) / POINTS, max: 0 };
    var degraded = troubleSeries('degraded'), errors = troubleSeries('storeErrors');
    var peak = 0;
    for (var i = 0; i < s.allowed.length; i++) peak = Math.max(peak, s.allowed[i] + s.throttled[i]);
    for (var d = 0; d < degraded.length; d++) peak = Math.max(peak, degraded[d], errors[d]);
    geo.max = niceMax(peak);
    drawBreaker(g, c, geo);
    drawAxes(g, c, geo);
    var bw = Math.max(1, geo.slot - 1);
    var n = s.allowed.length;
    for (var j = 0; j < n; j++) {
      var bx = geo.left + geo.pw - (n - j) * geo.slot;
      var ha = (s.allowed[j] / geo.max) * geo.ph;
      var ht = (s.throttled[j] / geo.max) * geo.ph;
      if (ha > 0) { g.fillStyle = c.ok; g.fillRect(bx, geo.top + geo.ph - ha, bw, ha); }
      if (ht > 0) { g.fillStyle = c.bad; g.fillRect(bx, geo.top + geo.ph - ha - ht, bw, ht); }
    }
    drawLine(g, geo, errors, c.errors, [4, 3]);
    drawLine(g, geo, degraded, c.degraded, []);
    describeChart(canvas, s, n, geo.max);
  }

  // What the chart last drew, on the canvas (for tests and scripts).
  function describeChart(canvas, s, n, max) {
    var t = state.trouble, last = t.length > 0 ? t[t.length - 1] : troubleOf({});
    var unhealthy = 0;
    for (var i = 0; i < t.length; i++) if (t[i].breaker !== 'closed') unhealthy += 1;
    canvas.setAttribute('data-rule', state.selected === ALL ? 'all' : state.selected);
    canvas.setAttribute('data-points', String(n));
    canvas.setAttribute('data-max', String(max));
    canvas.setAttribute('data-allowed-sum', String(sum(s.allowed)));
    canvas.setAttribute('data-throttled-sum', String(sum(s.throttled)));
    canvas.setAttribute('data-last-allowed', String(n > 0 ? s.allowed[n - 1] : 0));
    canvas.setAttribute('data-last-throttled', String(n > 0 ? s.throttled[n - 1] : 0));
    canvas.setAttribute('data-degraded-sum', String(sum(troubleSeries('degraded'))));
    canvas.setAttribute('data-last-degraded', String(last.degraded));
    canvas.setAttribute('data-store-errors-sum', String(sum(troubleSeries('storeErrors'))));
    canvas.setAttribute('data-fallbacks-sum', String(sum(troubleSeries('fallbacks'))));
    canvas.setAttribute('data-unhealthy-seconds', String(unhealthy));
    canvas.setAttribute('data-last-breaker', last.breaker);
    canvas.setAttribute('data-draws', String(Number(canvas.getAttribute('data-draws') || 0) + 1));
    var split = $('degraded-split');
    var open = sum(troubleSeries('failOpen')), closed = sum(troubleSeries('failClosed')), local = sum(troubleSeries('localFallback'));
    split.textContent = 'degraded, last 2 min: fail-open ' + fmt(open) + ', fail-closed ' + fmt(closed) + ', local-fallback ' + fmt(local);
    split.setAttribute('data-fail-open', String(open));
    split.setAttribute('data-fail-closed', String(closed));
    split.setAttribute('data-local-fallback', String(local));
  }

  // The hovered second, in the canvas's tooltip.
  function hover(e) {
    var canvas = $('chart');
    var geo = { left: 44, pw: canvas.clientWidth - 54 };
    var n = state.times.length;
    var j = n - Math.ceil((geo.left + geo.pw - e.offsetX) / (geo.pw / POINTS));
    if (j < 0 || j >= n) { canvas.title = ''; return; }
    var s = state.series.get(state.selected) || series(ALL), t = state.trouble[j];
    canvas.title = new Date(state.times[j]).toLocaleTimeString() + '\nallowed ' + s.allowed[j] + ', throttled ' + s.throttled[j] +
      '\ndegraded ' + t.degraded + ' (fail-open ' + t.failOpen + ', fail-closed ' + t.failClosed + ', local-fallback ' + t.localFallback + ')' +
      '\nfallbacks ' + t.fallbacks + ' (' + causesText(t.fallbacksBy) + ')\nstore errors ' + t.storeErrors + '\nbreaker ' + t.breaker;
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
    var signature = names.join('\n');
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

  // The store's health, from the limiter: breaker badge, time since healthy, last error, the banner.
  function renderHealth(snap) {
    var sec = snap.second, tot = snap.totals, h = snap.health;
    setValue('rate-degraded', sec.degraded || 0);
    setValue('degraded-total', tot.degraded || 0);
    setText('degraded-reasons', 'open ' + fmt(sec.failOpen || 0) + ', closed ' + fmt(sec.failClosed || 0) + ', local ' + fmt(sec.localFallback || 0));
    setValue('rate-fallbacks', sec.fallbacks || 0);
    setText('fallback-causes', causesText(sec.fallbacksBy));
    if (!h) return;
    $('fallback-causes').title = 'Per second: ' + causesText(sec.fallbacksBy) + '\nSince start: ' + causesText(h.fallbacks);
    setValue('fallbacks-total', h.fallbacksTotal);
    var badge = $('breaker');
    badge.textContent = 'store ' + (h.breaker === 'closed' ? 'healthy (breaker closed)' : 'breaker ' + h.breaker.toUpperCase());
    badge.className = 'pill breaker ' + (h.breaker === 'open' ? 'down' : h.breaker === 'half-open' ? 'warn' : 'ok');
    badge.setAttribute('data-value', h.breaker);
    var since = $('since-healthy');
    since.textContent = h.unhealthyForMs !== null ? 'store unhealthy for ' + secs(h.unhealthyForMs)
      : h.sinceHealthyMs === null ? 'last healthy: \u2014' : 'last healthy ' + secs(h.sinceHealthyMs) + ' ago';
    since.setAttribute('data-value', h.sinceHealthyMs === null ? '' : String(h.sinceHealthyMs));
    since.className = 'sub' + (h.unhealthyForMs !== null ? ' error' : '');
    var err = $('last-error');
    err.textContent = h.lastError === null ? '' : 'last error: ' + h.lastError;
    err.title = h.lastError === null ? '' : h.lastError;
    err.setAttribute('data-value', h.lastError === null ? '' : h.lastError);
    var banner = $('trouble');
    banner.hidden = h.breaker === 'closed';
    banner.className = 'trouble' + (h.breaker === 'half-open' ? ' half' : '');
    setText('trouble-title', 'Store unhealthy for ' + secs(h.unhealthyForMs || 0) + ' (breaker ' + h.breaker + '):');
    setText('trouble-detail', 'checks are answered by the failure modes (' + fmt(sec.degraded || 0) + ' degraded checks, ' + fmt(sec.fallbacks || 0) +
      ' fallbacks in the last second)' + (h.lastError === null ? '.' : '. Last error: ' + h.lastError));
  }

  function healthPairs(h) {
    var pairs = [['Breaker', h.breaker, h.breaker === 'closed' ? '' : 'error']];
    pairs.push(['Last healthy', h.lastHealthyAt === null ? '\u2014' : new Date(h.lastHealthyAt).toLocaleTimeString() + ' (' + secs(h.sinceHealthyMs) + ' ago)']);
    if (h.lastFailureAt !== null) pairs.push(['Last failure', new Date(h.lastFailureAt).toLocaleTimeString()]);
    if (h.lastError !== null) pairs.push(['Last store error', h.lastError, 'error']);
    pairs.push(['Calls in flight', String(h.inFlight)]);
    pairs.push(['Fallbacks', fmt(h.fallbacksTotal) + ' (' + causesText(h.fallbacks) + ')', h.fallbacksTotal > 0 ? 'error' : '']);
    return pairs;
  }

  // Checks (requests) = allowed checks + throttled checks; decisions = allowed + over limit.
  function renderCards(sec, tot, lat) {
    setValue('rate-checks', sec.checks);
    setText('checks-split', 'allowed ' + fmt(sec.allowedChecks) + ' + throttled ' + fmt(sec.deniedChecks));
    setValue('checks-total', tot.checks);
    setValue('rate-allowed-checks', sec.allowedChecks);
    setValue('allowed-checks-total', tot.allowedChecks);
    setValue('rate-throttled-checks', sec.deniedChecks);
    setValue('throttled-checks-total', tot.deniedChecks);
    setValue('rate-decisions', sec.allowed + sec.throttled);
    setValue('rate-allowed', sec.allowed);
    setValue('rate-throttled', sec.throttled);
    setValue('decisions-total', tot.allowed + tot.throttled);
    setValue('allowed-total', tot.allowed);
    setValue('throttled-total', tot.throttled);
    setValue('rate-slots-granted', sec.slotsGranted || 0);
    setValue('rate-slots-released', sec.slotsReleased || 0);
    setValue('rate-slots-refused', sec.slotsRefused || 0);
    setValue('slots-granted-total', tot.slotsGranted || 0);
    setValue('slots-released-total', tot.slotsReleased || 0);
    setValue('slots-refused-total', tot.slotsRefused || 0);
    setValue('rate-limit-api', sec.limitChecks);
    setValue('limit-api-total', tot.limitChecks);
    setValue('rate-unknown', sec.unknownDomain);
    setValue('unknown-total', tot.unknownDomain);
    $('unknown-card').className = 'card' + (tot.unknownDomain > 0 ? ' warn-on' : '');
    setValue('rate-listed', sec.allowListed + sec.denyListed);
    setValue('allow-listed-total', tot.allowListed);
    setValue('deny-listed-total', tot.denyListed);
    setValue('rate-blocked', sec.blocked || 0);
    setValue('blocked-total', tot.blocked || 0);
    setValue('blocks-started-total', tot.blocksStarted || 0);
    var seen = lat && lat.count > 0;
    setValue('latency-p50', seen ? lat.p50Ms : 0, seen ? millis(lat.p50Ms) : '-');
    setValue('latency-p99', seen ? lat.p99Ms : 0, seen ? millis(lat.p99Ms) : '-');
  }

  // A latency in ms, with the digits that matter: 0.012, 0.85, 37.
  function millis(ms) {
    if (ms < 0.1) return ms.toFixed(3);
    if (ms < 10) return ms.toFixed(2);
    return String(Math.round(ms));
  }

  // One row per worker (--workers N), hidden with one process.
  function renderWorkers(workers) {
    var section = $('workers');
    section.hidden = !workers;
    if (!workers) return;
    var body = $('workers-body');
    body.textContent = '';
    for (var i = 0; i < workers.length; i++) {
      var w = workers[i];
      var tr = document.createElement('tr');
      tr.setAttribute('data-worker', String(w.worker));
      cell(tr, w.worker === 'exited' ? 'exited (kept)' : String(w.worker), '');
      cell(tr, w.pid ? String(w.pid) : '-', '');
      cell(tr, fmt(w.checksPerSecond), '', w.checksPerSecond);
      cell(tr, fmt(w.checks), '', w.checks).setAttribute('data-col', 'checks');
      cell(tr, fmt(w.allowedChecks), '', w.allowedChecks);
      cell(tr, fmt(w.deniedChecks), 't', w.deniedChecks);
      cell(tr, fmt(w.decisions), '', w.decisions);
      cell(tr, w.breaker, w.breaker === 'open' ? 't' : '');
      cell(tr, String(w.clients), '');
      body.appendChild(tr);
    }
  }

  // The gateway's waiting rooms (snapshot panels.waitingRooms): one card a room, hidden without rooms.
  function renderRooms(rooms) {
    var section = $('waiting-rooms');
    section.hidden = !rooms || rooms.length === 0;
    if (section.hidden) return;
    section.textContent = '';
    for (var i = 0; i < rooms.length; i++) {
      var r = rooms[i];
      var card = document.createElement('div');
      card.className = 'card' + (r.queueLength > 0 ? ' warn' : ' ok');
      card.setAttribute('data-room', r.room);
      card.title = 'Waiting room ' + r.room + ': places queued (shared by every gateway node), active sessions of at most ' + r.activeUsers;
      var parts = [
        ['label', 'Waiting room ' + r.room + ': queued', ''],
        ['value', fmt(r.queueLength), 'queue-length', r.queueLength],
        ['sub', 'active ' + fmt(r.activeSessions) + ' of ' + fmt(r.activeUsers), 'active', r.activeSessions],
        ['sub', 'admitted ' + fmt(r.admittedPerSecond) + ' / s', 'admitted-rate', r.admittedPerSecond],
        ['sub', 'last wait ' + (r.lastWaitSeconds === null ? '-' : duration(r.lastWaitSeconds * 1000)), 'last-wait', r.lastWaitSeconds === null ? '' : r.lastWaitSeconds],
      ];
      for (var j = 0; j < parts.length; j++) {
        var el = document.createElement('div');
        el.className = parts[j][0];
        el.textContent = parts[j][1];
        if (parts[j][2]) {
          el.setAttribute('data-field', parts[j][2]);
          el.setAttribute('data-value', String(parts[j][3]));
        }
        card.appendChild(el);
      }
      section.appendChild(card);
    }
  }

  function render(snap) {
    var sec = snap.second, tot = snap.totals;
    renderRooms(snap.panels && snap.panels.waitingRooms);
    renderCards(sec, tot, snap.latency);
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
    renderHealth(snap);
    setText('store-name', st.name + (st.keys !== undefined ? ' - ' + fmt(st.keys) + ' keys' : ''));
    var fb = st.fallback;
    var fbText = fb === null || fb === undefined ? '-' : String(fb);
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
    if (snap.health) storePairs = storePairs.concat(healthPairs(snap.health));
    storePairs.push(['Failure mode', fbText]);
    storePairs.push(['Ready', snap.ready === undefined ? 'checking' : snap.ready ? 'yes' : 'no', snap.ready === false ? 'error' : '']);
    dl('store-info', storePairs);

    setText('uptime', duration(snap.uptimeMs));
    setText('clients', String(snap.clients));
    renderList('top-keys', snap.topKeys, function (k) { return k.key; }, function (k) { return k.throttled; }, 'Nothing throttled yet.');
    renderList('top-rules', snap.topRules, function (r) { return r.rule; }, function (r) { return r.throttled; }, 'Nothing throttled yet.');
    renderList('unknown-domains', snap.unknownDomains || [], function (d) { return d[0]; }, function (d) { return d[1]; }, 'None: every check named a domain in the rules.');
    var overrides = snap.rulesInfo.overrides || { total: 0, listed: [] };
    setValue('overrides-total', overrides.total);
    renderList('overrides', overrides.listed, function (o) { return o.id + ' per ' + o.unit + ' over ' + (o.shadows || '(no rule)') + (o.expires ? ' until ' + o.expires : ''); }, function (o) { return o.requestsPerUnit; }, 'None: every limit is a rule\'s.');
    renderWorkers(snap.workers);

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
  $('chart').addEventListener('mousemove', hover);

  var source = new EventSource('/v1/events');
  source.addEventListener('open', function () { connection('live', 'live'); });
  source.addEventListener('error', function () {
    connection(source.readyState === 2 ? 'disconnected' : 'reconnecting', 'down');
  });
  source.addEventListener('history', function (e) {
    state.times = [];
    state.trouble = [];
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
