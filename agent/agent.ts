/**
 * The running agent: session sync (long poll with ETag, falling back to polling every syncInterval),
 * one reconcile pass per change or interval, heartbeat and metric loops, health for the local server.
 * A controller that cannot be reached leaves the running config alone; the loop backs off and resumes.
 */
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { AgentSession, BirdConfigResponse, ReportBody } from '../common/agent-api.ts';
import { VERSION } from '../common/version.ts';
import { BirdApplier } from './bird/apply.ts';
import { BirdControl } from './bird/control.ts';
import type { AgentConfig } from './config.ts';
import type { ControlPlaneClient } from './sync/client.ts';
import { AgentMetrics } from './metrics.ts';
import { collectMetrics } from './sync/metrics.ts';
import { Reconciler, type ReconcileHooks, type PassResult } from './sync/reconcile.ts';

const LONG_POLL_MAX_S = 55;

export class Agent {
  readonly config: AgentConfig;
  readonly client: ControlPlaneClient;
  readonly bird: BirdControl;
  readonly applier: BirdApplier;
  readonly reconciler: Reconciler;
  private readonly log: Logger;
  private readonly started = Date.now();
  private readonly stop = new AbortController();
  private sessions: AgentSession[] = [];
  private policy: BirdConfigResponse | undefined;
  private etag: string | undefined;
  private longPoll = true;
  private failures = 0;
  private loops: Promise<void>[] = [];
  lastPass: PassResult | undefined;
  passes = 0;
  private lastReport: ReportBody | undefined;
  /** Served at GET /metrics by the local server. */
  readonly metrics: AgentMetrics;
  /** Settles after the first pass that fetched from the controller and reconciled: this version works here. */
  readonly firstPass: Promise<void>;
  private passed: () => void = () => undefined;

  constructor(config: AgentConfig, log: Logger, client: ControlPlaneClient, hooks?: ReconcileHooks) {
    this.config = config;
    this.log = log;
    this.client = client;
    this.firstPass = new Promise((resolve) => (this.passed = resolve));
    this.metrics = new AgentMetrics({
      // the agent's own verdict of the last pass where it reported one, else the controller's status
      sessions: () => {
        const reported = new Map(this.lastPass?.reports.map((r) => [r.uuid, r.status]));
        return this.sessions.map((s) => ({ ...s, status: reported.get(s.uuid) ?? s.status }));
      },
      lastReport: () => this.lastReport,
      configureCalls: () => this.applier.configureCalls,
      health: () => this.health(),
    });
    this.bird = new BirdControl(config.routing.controlSocket, {
      poolSize: config.routing.poolSize,
      poolSizeMax: config.routing.poolSizeMax,
    });
    this.applier = new BirdApplier(this.bird, config.birdMainConfig);
    const templateFile = config.routing.ebgpConfTemplateFile;
    this.reconciler = new Reconciler({
      config,
      bird: this.bird,
      applier: this.applier,
      log,
      report: async (body) => {
        await client.modify(body);
        log.info({ session: body.uuid, status: body.status }, 'status reported');
      },
      ...(templateFile ? { template: () => readFile(templateFile, 'utf8') } : {}),
      ...(hooks ? { hooks } : {}),
    });
  }

  start(): void {
    this.loops = [
      this.syncLoop(),
      this.every(this.config.controlPlane.heartbeatInterval, () => this.heartbeatOnce()),
      this.every(this.config.controlPlane.metricInterval, async () => void (await this.reportMetricsOnce())),
    ];
  }

  async close(): Promise<void> {
    this.stop.abort();
    await Promise.allSettled(this.loops);
    this.bird.close();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.stop.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
  }

  private async every(seconds: number, fn: () => Promise<void>): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        await fn();
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'periodic task failed');
      }
      await this.sleep(seconds * 1000);
    }
  }

  /** One sync round: fetch (long poll when it works), then reconcile. Exposed for tests and the benchmark. */
  async syncOnce(waitSeconds = 0): Promise<PassResult | undefined> {
    const t0 = Date.now();
    const r = await this.client.sessions({
      ...(this.etag ? { etag: this.etag } : {}),
      ...(waitSeconds ? { waitSeconds } : {}),
      signal: this.stop.signal,
    });
    if (waitSeconds && !r.body && Date.now() - t0 < 500) {
      this.longPoll = false; // a 304 without waiting: the controller does not hold requests
      this.log.info('controller answers long polls at once; polling every syncInterval');
    }
    if (r.body) this.sessions = r.body.sessions;
    this.etag = r.etag;
    this.policy = await this.client.birdConfig();
    const reconcileStart = performance.now();
    const result = await this.reconciler.pass(this.sessions, this.policy);
    this.metrics.passSeconds.observe((performance.now() - reconcileStart) / 1000);
    this.lastPass = result;
    this.passes++;
    this.passed();
    return result;
  }

  private async syncLoop(): Promise<void> {
    const interval = this.config.controlPlane.syncInterval;
    while (!this.stop.signal.aborted) {
      const wait = this.longPoll && this.passes > 0 ? Math.min(interval, LONG_POLL_MAX_S) : 0;
      try {
        const t0 = Date.now();
        await this.syncOnce(wait);
        this.metrics.passes.inc({ result: 'ok' });
        this.failures = 0;
        if (!this.longPoll || wait === 0)
          await this.sleep(Math.max(0, (this.passes > 1 ? interval * 1000 : 0) - (Date.now() - t0)));
      } catch (err) {
        if (this.stop.signal.aborted) break;
        this.metrics.passes.inc({ result: 'failed' });
        this.failures++;
        const delay = Math.min(60_000, this.client.backoff(Math.min(this.failures, 10)));
        this.log.warn(
          { err: (err as Error).message, retryInMs: delay },
          'sync failed; keeping the running config',
        );
        await this.sleep(delay);
      }
    }
  }

  /** One heartbeat (SPEC 2.5): version, uptime in seconds, the mesh public key when there is one. */
  async heartbeatOnce(): Promise<void> {
    let meshPublicKey: string | undefined;
    try {
      const { meshPublicKey: read } = await import('./mesh/key.ts');
      meshPublicKey = await read(this.config.tunnel.configDir);
    } catch {
      // no mesh key yet
    }
    await this.client.heartbeat({
      version: VERSION,
      uptime: Math.floor((Date.now() - this.started) / 1000),
      ...(meshPublicKey ? { meshPublicKey } : {}),
    });
  }

  /** One metric report (SPEC 2.6); the RTTs also feed the latency community of the next pass. */
  async reportMetricsOnce(): Promise<ReportBody | undefined> {
    if (this.passes === 0) return undefined;
    const report = await collectMetrics(this.sessions, this.bird, this.config.metric);
    for (const r of report.sessions) this.reconciler.rtt.set(r.uuid, r.rtt);
    this.lastReport = report;
    await this.client.report(report);
    return report;
  }

  async health(): Promise<{
    ok: boolean;
    bird: boolean;
    controller: boolean;
    version: string;
    uptime: number;
  }> {
    const bird = await this.bird.ping();
    const limit =
      Math.max(3 * this.config.controlPlane.heartbeatInterval, 2 * this.config.controlPlane.syncInterval) *
      1000;
    const controller =
      this.client.lastContact > 0 && Date.now() - this.client.lastContact < limit && !this.client.lastError;
    return {
      ok: bird && controller,
      bird,
      controller,
      version: VERSION,
      uptime: Math.floor((Date.now() - this.started) / 1000),
    };
  }
}
