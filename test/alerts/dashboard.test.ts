/**
 * charts/peerops/files/dashboard.json (docs/kubernetes.md, "Monitoring"): every metric name in every PromQL
 * expression is in a real scrape. The controller's is GET /metrics of the API harness with a router, sessions
 * in several states and a metric report; the agent's is its local server (agent/server.ts) serving the
 * agent metrics module's own registry (agent/metrics.ts) over the state of that router as the controller
 * hands it out. A running agent needs root and network namespaces (test/agent/netns.test.ts); its metrics
 * are this same registry, so nothing of the agent is left out here.
 */
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../agent/config.ts';
import { AgentMetrics } from '../../agent/metrics.ts';
import { startServer } from '../../agent/server.ts';
import type { AgentSession, ReportBody } from '../../common/agent-api.ts';
import { driver, expectOk, startHarness, type Harness } from '../api/helpers.ts';

interface Panel {
  id: number;
  title: string;
  type: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}
interface Dashboard {
  panels: Panel[];
  templating: { list: { name: string; definition?: string }[] };
}

const PROMQL_WORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'offset',
]);

/**
 * The metric names of a PromQL expression: identifiers that are not functions, keywords or label names.
 * Strings, label matchers, range selectors and grouping clauses are cut out first.
 */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of bare.matchAll(/(?<![\w$.])([a-zA-Z_:][\w:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (name && !call && !PROMQL_WORDS.has(name)) names.add(name);
  }
  return [...names];
}

/** The sample names of an exposition (a histogram's _bucket, _sum and _count each). */
function sampleNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)[{ ]/.exec(line);
    if (m?.[1]) names.add(m[1]);
  }
  return names;
}

let h: Harness;
let controllerNames: Set<string>;
let agentNames: Set<string>;
const close: (() => Promise<void>)[] = [];

beforeAll(async () => {
  h = await startHarness();
  close.push(() => h.close());
  const token = await h.addRouter('fra1');
  const d = driver(h, 'fra1', token);
  const active = await d.inStatus(1);
  await d.inStatus(2);
  await d.inStatus(4);
  const report: ReportBody = {
    sessions: [{ uuid: active, rtt: 4.5, rxBytes: 1000, txBytes: 2000, routesImported: 12 }],
  };
  await expectOk(h.post('/agent/fra1/report', token, report));
  controllerNames = sampleNames((await expectOk(h.get('/metrics'))).body);

  const { sessions } = (await expectOk(h.get('/agent/fra1/sessions', token))).json() as {
    sessions: AgentSession[];
  };
  const metrics = new AgentMetrics({
    sessions: () => sessions,
    lastReport: () => report,
    configureCalls: () => 1,
    configApplied: () => true,
    health: async () => ({ bird: true, controller: true }),
  });
  // what one sync pass of the agent records (agent/agent.ts)
  metrics.passes.inc({ result: 'ok' });
  metrics.passSeconds.observe(0.2);
  const config = parseConfig(
    {
      server: { listen: '127.0.0.1:0' },
      node: { name: 'fra1' },
      controlPlane: { url: 'http://[::1]:8080', token: 'a-very-secret-agent-token' },
    },
    'agent.json',
  );
  const server = await startServer(config, {
    health: async () => ({ ok: true, bird: true, controller: true }),
    metrics,
  });
  close.push(() => new Promise<void>((r) => server.close(() => r())));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`);
  expect(res.status).toBe(200);
  agentNames = sampleNames(await res.text());
});
afterAll(async () => {
  for (const c of close.reverse()) await c();
});

async function dashboard(): Promise<Dashboard> {
  return JSON.parse(await readFile('charts/peerops/files/dashboard.json', 'utf8')) as Dashboard;
}

function expressions(d: Dashboard): { panel: string; expr: string }[] {
  const panels = d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  return [
    ...panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr }))),
    ...d.templating.list.flatMap((v) =>
      v.definition
        ? [{ panel: `variable ${v.name}`, expr: /label_values\(([^,)]+)/.exec(v.definition)?.[1] ?? '' }]
        : [],
    ),
  ];
}

describe('charts/peerops/files/dashboard.json', () => {
  it('finds metric names in PromQL', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (le, operation) (rate(x_bucket{a="b{c}"}[$__rate_interval]))) / on (a) y',
      ),
    ).toEqual(['x_bucket', 'y']);
    expect(metricNames('time() - max by (router) (agent_heartbeat_timestamp) * 1000')).toEqual([
      'agent_heartbeat_timestamp',
    ]);
  });

  it("queries only series a controller's or an agent's scrape has", async () => {
    const exprs = expressions(await dashboard());
    expect(exprs.length).toBeGreaterThan(20);
    const missing: string[] = [];
    const used = new Set<string>();
    for (const { panel, expr } of exprs) {
      const names = metricNames(expr);
      expect(names, `${panel}: ${expr}`).not.toEqual([]);
      for (const name of names) {
        used.add(name);
        if (!controllerNames.has(name) && !agentNames.has(name)) missing.push(`${panel}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
    // the panels the brief of the dashboard names (docs/kubernetes.md, "Monitoring")
    for (const name of [
      'http_requests_total',
      'http_request_duration_seconds_bucket',
      'active_sessions_total',
      'peerops_sessions_stuck',
      'peerops_session_state',
      'agent_heartbeat_timestamp',
      'peerops_agent_offline',
      'peerops_session_rtt_seconds',
      'peerops_session_routes_imported',
      'peerops_session_rx_bytes',
      'peerops_agent_session_rtt_seconds',
      'peerops_agent_sync_passes_total',
    ])
      expect(used).toContain(name);
  });

  it('is a dashboard Grafana imports on its own: a datasource variable, unique panel ids, a uid', async () => {
    const d = (await dashboard()) as Dashboard & { uid: string };
    expect(d.uid).toBe('peerops-overview');
    expect(d.templating.list.map((v) => v.name)).toContain('datasource');
    const ids = d.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
