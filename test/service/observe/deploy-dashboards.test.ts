/**
 * The Grafana dashboard (deploy/grafana/) and the Prometheus alerting rules (deploy/prometheus/)
 * against what the service exposes: both files parse and hold what an operator looks for (breaker
 * open, degraded share, rules reload failing, over-limit spikes, check latency, deferred queue
 * depth), and every metric their PromQL names is a family on the /metrics of a real `tollgate
 * serve` (memory store) or `tollgate gateway` (Redis, a deferred route).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startTestGateway, type TestGateway } from '../../support/gateway.js';
import { useRedisServer } from '../../support/redis-topologies.js';
import { startServiceProcess, type ServiceProcess } from '../../support/service.js';

const root = new URL('../../../', import.meta.url).pathname;
const DASHBOARD = 'deploy/grafana/tollgate-dashboard.json';
const ALERTS = 'deploy/prometheus/tollgate-alerts.yml';
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** Series Prometheus makes itself for each scrape target, not exposed by any /metrics. */
const PROMETHEUS_SERIES: ReadonlySet<string> = new Set(['up']);
/** PromQL words that are not metric names (functions are told apart by the `(` after them). */
const PROMQL_KEYWORDS: ReadonlySet<string> = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool']);

/** The metric names a PromQL expression reads: what is left once strings, matchers, ranges, label lists, functions and keywords are set aside. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names: string[] = [];
  for (const match of bare.matchAll(/(?<![\w.$])[a-zA-Z_:][\w:]*/g)) {
    const isCall = /^\s*\(/.test(bare.slice(match.index + match[0].length));
    if (!isCall && !PROMQL_KEYWORDS.has(match[0])) names.push(match[0]);
  }
  return names;
}

/** Whether `(`, `{`, `[` close in order: a cheap guard against a truncated expression. */
function balanced(expr: string): boolean {
  const stack: string[] = [];
  const pairs: Record<string, string> = { ')': '(', '}': '{', ']': '[' };
  for (const char of expr.replace(/"(?:[^"\\]|\\.)*"/g, '""')) {
    if ('({['.includes(char)) stack.push(char);
    else if (char in pairs && stack.pop() !== pairs[char]) return false;
  }
  return stack.length === 0;
}

/** The metric families of a /metrics text: name → type. */
function families(exposition: string): Map<string, string> {
  return new Map([...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => [match[1]!, match[2]!]));
}

/** Whether `name` is a family, or a histogram's `_bucket` / `_sum` / `_count` series. */
function exposed(name: string, known: ReadonlyMap<string, string>): boolean {
  if (known.has(name)) return true;
  const series = /^(.+)_(bucket|sum|count)$/.exec(name);
  return series !== null && known.get(series[1]!) === 'histogram';
}

interface Panel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly datasource?: { readonly uid: string };
  readonly targets?: readonly { readonly expr: string; readonly datasource?: { readonly uid: string } }[];
}
interface Dashboard {
  readonly uid: string;
  readonly panels: readonly Panel[];
  readonly templating: { readonly list: readonly { readonly name: string; readonly type: string; readonly query: unknown }[] };
}
interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for: string;
  readonly labels: { readonly severity: string };
  readonly annotations: { readonly summary: string; readonly description: string };
}

const dashboard = JSON.parse(read(DASHBOARD)) as Dashboard;
const alerts = (parseYaml(read(ALERTS)) as { groups: { name: string; rules: AlertRule[] }[] }).groups.flatMap((group) => group.rules);

/** Every PromQL expression of the dashboard (panels' targets, and the variables' label_values queries), with where it stands. */
function dashboardExpressions(): [string, string][] {
  const targets = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target): [string, string] => [panel.title, target.expr]));
  const variables = dashboard.templating.list
    .filter((variable) => variable.type === 'query')
    .map((variable): [string, string] => [`$${variable.name}`, /^label_values\((\w+),/.exec((variable.query as { query: string }).query)![1]!]);
  return [...targets, ...variables];
}

describe('PromQL metric names, as the checks below read them', () => {
  it.each([
    ['sum by (domain) (rate(tollgate_checks_total{result="over_limit", instance=~"$instance"}[$__rate_interval]))', ['tollgate_checks_total']],
    ['histogram_quantile(0.99, sum by (instance, le) (rate(tollgate_check_duration_seconds_bucket[5m]))) > 0.025', ['tollgate_check_duration_seconds_bucket']],
    ['a_total > 3 * sum by (d) (rate(b_total[1h] offset 5m)) and on (d) c > 1', ['a_total', 'b_total', 'c']],
    ['up{job="tollgate"} == 0', ['up']],
  ])('%s reads %j', (expr, names) => {
    expect(metricNames(expr)).toEqual(names);
    expect(balanced(expr)).toBe(true);
  });

  it('a misspelt metric is not taken for an exposed one, and a cut expression is not balanced', () => {
    const known = new Map([['tollgate_checks_total', 'counter'], ['tollgate_check_duration_seconds', 'histogram']]);
    expect(metricNames('rate(tollgate_checks_totl[5m])').filter((name) => !exposed(name, known))).toEqual(['tollgate_checks_totl']);
    expect(exposed('tollgate_check_duration_seconds_bucket', known)).toBe(true);
    expect(exposed('tollgate_checks_total_count', known)).toBe(false);
    expect(balanced('sum(rate(x[5m])')).toBe(false);
  });
});

describe('deploy/grafana and deploy/prometheus hold what an operator looks for', () => {
  it('the dashboard: unique panel ids, every panel on the datasource variable, every query balanced', () => {
    const ids = dashboard.panels.map((panel) => panel.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(dashboard.templating.list.map((variable) => variable.name)).toEqual(['datasource', 'instance']);
    for (const panel of dashboard.panels.filter((p) => p.type !== 'row')) {
      expect(panel.datasource?.uid, panel.title).toBe('${datasource}');
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets!) expect(balanced(target.expr), `${panel.title}: ${target.expr}`).toBe(true);
    }
    const titles = dashboard.panels.map((panel) => panel.title);
    expect(titles).toEqual(expect.arrayContaining(['Store breaker open', 'Degraded share', 'Rules reload failing', 'Over-limit share by domain', 'Check latency (rules lookup + store round trip)', 'Deferred queue depth']));
  });

  it('the alerts: each named once, with a duration, a severity, a summary and a description, and a balanced expression', () => {
    const names = alerts.map((rule) => rule.alert);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(['TollgateStoreBreakerOpen', 'TollgateDegradedShare', 'TollgateRulesReloadFailing', 'TollgateOverLimitSpike', 'TollgateSlowChecks', 'TollgateDeferredQueueBacklog']));
    for (const rule of alerts) {
      expect(rule.for, rule.alert).toMatch(/^\d+[smh]$/);
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
      expect([typeof rule.annotations.summary, typeof rule.annotations.description], rule.alert).toEqual(['string', 'string']);
      expect(balanced(rule.expr), rule.alert).toBe(true);
    }
  });
});

describe('every metric the dashboard and the alerts use is on /metrics', () => {
  const redis = useRedisServer();
  let service: ServiceProcess;
  let gateway: TestGateway;
  const known = new Map<string, string>();
  beforeAll(async () => {
    [service, gateway] = await Promise.all([
      startServiceProcess(['--config', join(root, 'examples/rules')]),
      startTestGateway(
        `listen: 0
upstreams: { app: "http://127.0.0.1:1" }
routes:
  - match: { prefix: /jobs }
    upstream: app
    domain: jobs
    on_limit: defer
    defer: { queue: jobs }
    rate_limits: [{ actions: [{ generic_key: { descriptor_key: client, descriptor_value: paced } }] }]
`,
        'domain: jobs\ndescriptors:\n  - { key: client, value: paced, rate_limit: { unit: second, requests_per_unit: 5 } }\n',
        { flags: { redis: redis.url } },
      ),
    ]);
    for (const url of [service.admin('/metrics'), gateway.admin('/metrics')]) {
      for (const [name, type] of families(await (await fetch(url)).text())) known.set(name, type);
    }
  }, 40_000);
  afterAll(async () => {
    await Promise.all([service?.stop(), gateway?.close()]);
  });

  it('the scrapes hold the service, memory store and deferred-queue families', () => {
    expect(known.get('tollgate_check_duration_seconds')).toBe('histogram');
    expect([...known.keys()]).toEqual(expect.arrayContaining(['tollgate_checks_total', 'tollgate_memory_store_keys', 'tollgate_deferred_queue_length', 'tollgate_store_breaker_state']));
  });

  it.each(dashboardExpressions())(`${DASHBOARD}: %s: %s`, (_where, expr) => {
    const names = metricNames(expr);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !exposed(name, known))).toEqual([]);
  });

  it.each(alerts.map((rule) => [rule.alert, rule.expr]))(`${ALERTS}: %s`, (_alert, expr) => {
    const names = metricNames(expr);
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((name) => !exposed(name, known) && !PROMETHEUS_SERIES.has(name))).toEqual([]);
  });
});
