/**
 * The running agent: session sync (long poll with ETag, falling back to polling every syncInterval),
 * one reconcile pass per change or interval, heartbeat and metric loops, health for the local server.
 * A controller that cannot be reached leaves the running config alone; the loop backs off and resumes.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentSession, BirdConfigResponse, MeshStatusBody, ReportBody } from '../common/agent-api.ts';
import type { Condition } from '../common/schema.ts';
import { DEFAULT_HEARTBEAT_INTERVAL_S } from '../common/conditions.ts';
import { conditionMessage, type ConditionMessageKey, type MessageParams } from '../common/messages.ts';
import { oneLine } from '../common/text.ts';
import { VERSION } from '../common/version.ts';
import { BirdApplier, CONFIGURE_PENDING } from './bird/apply.ts';
import { BirdControl } from './bird/control.ts';
import type { AgentConfig } from './config.ts';
import { ControlPlaneError, type ControlPlaneClient } from './sync/client.ts';
import { AgentMetrics } from './metrics.ts';
import { FaultWatch } from './fault-watch.ts';
import { Adoption, adoptionDir } from './adopt/takeover.ts';
import { REMAINDER_FILE } from './adopt/remainder.ts';
import { sessionProtocols } from './bird/names.ts';
import { LongPollSupport } from './sync/long-poll.ts';
import { LookingGlassService } from './looking-glass/service.ts';
import { collectMetrics } from './sync/metrics.ts';
import type { MeshSource } from './reconcile/mesh-step.ts';
import { NodeReconciler, type PassResult } from './reconcile/node-reconciler.ts';
import { removeLeftovers } from './system/leftovers.ts';
import { systemWireGuard } from './wireguard/interface.ts';
import { LinkWatch } from './wireguard/link-watch.ts';

/** The longest a sync round's long poll waits (and never longer than syncInterval). */
export const LONG_POLL_MAX_S = 55;
/** The exit code when the controller refuses the agent's token (docs/agent.md): restarted with backoff. */
export const UNAUTHORIZED_EXIT = 77;

export interface HealthCheck {
  ok: boolean;
  /** Why not, precisely (absent when ok). */
  reason?: string;
}

export interface Health {
  ok: boolean;
  bird: boolean;
  controller: boolean;
  checks: { bird: HealthCheck; controller: HealthCheck; config: HealthCheck };
  version: string;
  uptime: number;
}

/** `ms` ± 10 %, uniformly: the wait between an agent's periodic heartbeats and reports. */
export function jittered(ms: number, random: () => number = Math.random): number {
  return Math.round(ms * (0.9 + random() * 0.2));
}

export class Agent {
  readonly config: AgentConfig;
  readonly client: ControlPlaneClient;
  readonly bird: BirdControl;
  readonly applier: BirdApplier;
  readonly reconciler: NodeReconciler;
  private readonly log: Logger;
  private readonly started = Date.now();
  private readonly stop = new AbortController();
  private sessions: AgentSession[] = [];
  private policy: BirdConfigResponse | undefined;
  private etag: string | undefined;
  private readonly longPoll = new LongPollSupport();
  private failures = 0;
  private loops: Promise<void>[] = [];
  lastPass: PassResult | undefined;
  passes = 0;
  private lastReport: ReportBody | undefined;
  /** Runs a pass when a wanted tunnel's link disappears between passes (link-watch.ts). */
  private readonly linkWatch: LinkWatch;
  /** Tells the controller at once when BIRD stops or starts answering, runs a pass when BGP moves (fault-watch.ts). */
  private readonly faultWatch: FaultWatch;
  /** Takes looking-glass queries from the controller and answers them (looking-glass/service.ts). */
  private readonly lookingGlass: LookingGlassService;
  /** Ends the sync loop's current wait (long poll or sleep); `wakeNow`: the next round waits for nothing. */
  private waitAborter: AbortController | undefined;
  private wakeNow = false;
  /** Served at GET /metrics by the local server. */
  readonly metrics: AgentMetrics;
  /** Settles after the first pass that fetched from the controller and reconciled: this version works here. */
  readonly firstPass: Promise<void>;
  private passed: () => void = () => undefined;
  /** Settles with an exit code when the agent cannot go on (the controller refused its token). */
  readonly fatal: Promise<number>;
  private fail: (code: number) => void = () => undefined;
  /** When the node condition last changed (its lastTransitionTime). */
  private conditionSince = new Date().toISOString();
  private conditionKey = '';
  /**
   * Whether the controller stores node conditions' keys (its last heartbeat answer said so): an older
   * controller refuses a heartbeat naming them (docs/agent.md, Upgrade order).
   */
  private conditionKeys = false;
  /** When BirdRunning last changed. */
  private birdSince = new Date().toISOString();
  private birdKey = '';

  /** `mesh`: where the router's mesh answer comes from (main.ts: the controller); without it, no mesh step. */
  constructor(config: AgentConfig, log: Logger, client: ControlPlaneClient, mesh?: MeshSource) {
    this.config = config;
    this.log = log;
    this.client = client;
    this.firstPass = new Promise((resolve) => (this.passed = resolve));
    this.fatal = new Promise((resolve) => (this.fail = resolve));
    this.metrics = new AgentMetrics({
      // the agent's own verdict of the last pass where it reported one, else the controller's status
      sessions: () => {
        const reported = new Map(this.lastPass?.reports.map((r) => [r.uuid, r.status]));
        return this.sessions.map((s) => ({ ...s, status: reported.get(s.uuid) ?? s.status }));
      },
      lastReport: () => this.lastReport,
      configureCalls: () => this.applier.configureCalls,
      configApplied: () => this.reconciler.nodeProblem === undefined,
      health: () => this.health(),
    });
    this.bird = new BirdControl(config.routing.controlSocket, {
      poolSize: config.routing.poolSize,
      poolSizeMax: config.routing.poolSizeMax,
    });
    this.applier = new BirdApplier(this.bird, config.birdMainConfig);
    this.lookingGlass = new LookingGlassService(client, this.bird, log, (listenPort) => {
      const s = this.sessions.find((x) => x.listenPort === listenPort);
      return sessionProtocols({ listenPort, adopted: s?.adopted });
    });
    this.linkWatch = new LinkWatch((names) => this.linksDeleted(names), log);
    this.faultWatch = new FaultWatch(
      this.bird,
      {
        bgp: () => this.reconciler.judgedBgp,
        handshakeDeadline: () => this.reconciler.handshakeDeadline,
      },
      {
        birdChanged: () => {
          this.wake();
          this.heartbeatOnce().catch((err: Error) =>
            log.warn({ err: err.message }, 'heartbeat on a change of BIRD failed; the next one tells'),
          );
        },
        passNeeded: (why) => {
          log.info({ why }, 'running a pass now');
          this.wake();
        },
      },
      log,
    );
    const templateFile = config.routing.ebgpConfTemplateFile;
    this.reconciler = new NodeReconciler({
      config,
      wireguard: systemWireGuard,
      bird: this.bird,
      applier: this.applier,
      log,
      reporter: client,
      ...(templateFile ? { template: () => readFile(templateFile, 'utf8') } : {}),
      ...(mesh ? { mesh } : {}),
      adoption: new Adoption({
        dir: adoptionDir(config.tunnel.configDir),
        mainPath: config.birdMainConfig,
        routerKeyPath: config.tunnel.privateKeyPath,
        remainderPath: join(config.routing.peerConfDir, REMAINDER_FILE),
      }),
    });
  }

  start(): void {
    this.linkWatch.start();
    this.faultWatch.start();
    this.loops = [
      this.syncLoop(),
      this.lookingGlass.run(this.stop.signal),
      this.every(this.config.controlPlane.heartbeatInterval, () => this.heartbeatOnce()),
      this.every(this.config.controlPlane.metricInterval, async () => void (await this.reportMetricsOnce())),
      this.every(this.config.controlPlane.metricInterval, async () => void (await this.reportMeshOnce())),
    ];
  }

  /**
   * Stops the loops: a long poll is aborted at once; a pass, heartbeat or report under way gets until
   * `graceMs` (systemd kills at TimeoutStopSec=30, Kubernetes after 30 s), then is left behind.
   * Answers whether something was: it may keep the process alive (a BIRD that does not answer).
   */
  async close(graceMs = 5000): Promise<boolean> {
    this.stop.abort();
    this.linkWatch.stop();
    this.faultWatch.stop();
    let timer: NodeJS.Timeout | undefined;
    const late = await Promise.race([
      Promise.allSettled(this.loops).then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), graceMs))),
    ]);
    clearTimeout(timer);
    if (late) this.log.warn({ graceMs }, 'a pass or report was still under way at shutdown; left behind');
    this.bird.close();
    return late;
  }

  /** Waits `ms`, or less when the agent stops or `signal` is aborted. */
  private sleep(ms: number, signal: AbortSignal = this.stop.signal): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener(
        'abort',
        () => {
          clearTimeout(t);
          resolve();
        },
        { once: true },
      );
    });
  }

  /**
   * Links gone between passes: when one of them is a tunnel the last pass wanted, a pass runs now instead
   * of at the end of the long poll (a crashed WireGuard process took it; docs/agent.md). The agent's own
   * removals are of links no pass wants any more.
   */
  private linksDeleted(names: string[]): void {
    const wanted = this.reconciler.wantedLinks;
    const lost = names.filter((name) => wanted.has(name));
    if (lost.length === 0) return;
    this.metrics.linksLost.inc(lost.length);
    this.log.warn(
      { interfaces: lost.slice(0, 10), count: lost.length },
      'tunnels deleted between passes; running a pass now',
    );
    this.wake();
  }

  /** Ends the sync loop's wait: the next round (fetch and pass) runs now. */
  private wake(): void {
    this.wakeNow = true;
    this.waitAborter?.abort();
  }

  /**
   * Runs `fn`, then again after `seconds` ± 10 %. The jitter keeps a fleet's heartbeats and reports from
   * staying in step: agents started together (a mass reboot, a rollout) would otherwise all reach the
   * controller in the same instant every interval (docs/benchmarks.md, the storm scenario).
   */
  private async every(seconds: number, fn: () => Promise<void>): Promise<void> {
    while (!this.stop.signal.aborted) {
      try {
        await fn();
      } catch (err) {
        this.log.warn({ err: (err as Error).message }, 'periodic task failed');
      }
      await this.sleep(jittered(seconds * 1000));
    }
  }

  /**
   * One sync round: fetch (long poll when it works), then reconcile. Exposed for tests and the benchmark.
   * `signal` ends the long poll early (the round then throws its abort): the agent stopping, or woken.
   */
  async syncOnce(waitSeconds = 0, signal = this.stop.signal): Promise<PassResult | undefined> {
    const t0 = Date.now();
    const r = await this.client.sessions({
      ...(this.etag ? { etag: this.etag } : {}),
      ...(waitSeconds ? { waitSeconds } : {}),
      signal,
    });
    if (waitSeconds && this.longPoll.answered(r.body !== undefined, Date.now() - t0))
      this.log.info('controller answers long polls at once; polling every syncInterval');
    const answeredAt = Date.now();
    if (r.body) this.sessions = r.body.sessions;
    this.etag = r.etag;
    this.policy = await this.client.birdConfig();
    const policyMs = Date.now() - answeredAt;
    const reconcileStart = performance.now();
    const result = await this.reconciler.pass(this.sessions, this.policy);
    this.metrics.passSeconds.observe((performance.now() - reconcileStart) / 1000);
    for (const [step, ms] of Object.entries(result.stepMs)) this.metrics.stepSeconds.inc({ step }, ms / 1000);
    this.metrics.fileWrites.inc(result.writes);
    this.metrics.tunnelChanges.inc(result.interfacesChanged + result.interfacesRemoved);
    // A pass BIRD refused, or could not be asked in, did not do its job.
    this.metrics.passes.inc({ result: result.node || result.birdUnreachable ? 'error' : 'ok' });
    this.lastPass = result;
    this.passes++;
    this.passed();
    // When the sessions arrived and what each step took: where a setup's time goes (docs/agent.md).
    if (result.configured || result.interfacesChanged || result.interfacesRemoved)
      this.log.info(
        { answeredAt, policyMs, stepMs: result.stepMs, writes: result.writes, configured: result.configured },
        'pass applied changes',
      );
    return result;
  }

  /**
   * Before the first pass: what a killed agent left in the directories it writes goes, in one log line
   * (docs/agent.md, "Files and links the agent owns"). A removed configure marker is owed to BIRD by
   * the first pass.
   */
  async removeLeftovers(): Promise<void> {
    const { birdConfigRoot, routing, tunnel } = this.config;
    const found = await removeLeftovers([
      birdConfigRoot,
      routing.peerConfDir,
      routing.ibgpConfDir,
      tunnel.configDir,
    ]);
    if (found.count === 0) return;
    if (found.removed.get(birdConfigRoot)?.includes(CONFIGURE_PENDING)) this.applier.configureOwed = true;
    this.log.info(
      {
        removed: found.count,
        dirs: Object.fromEntries([...found.removed].map(([dir, names]) => [dir, names.length])),
      },
      'removed what a killed pass left behind',
    );
  }

  private async syncLoop(): Promise<void> {
    const interval = this.config.controlPlane.syncInterval;
    await this.removeLeftovers().catch((err: Error) =>
      this.log.warn({ err: err.message }, 'could not remove what a killed pass left behind'),
    );
    while (!this.stop.signal.aborted) {
      const woken = this.wakeNow;
      this.wakeNow = false;
      const waking = new AbortController();
      this.waitAborter = waking;
      // the round's waits (long poll, pause) end when the agent stops or is woken
      const waits = AbortSignal.any([this.stop.signal, waking.signal]);
      const wait = this.longPoll.held && this.passes > 0 && !woken ? Math.min(interval, LONG_POLL_MAX_S) : 0;
      try {
        const t0 = Date.now();
        await this.syncOnce(wait, waits);
        // Back after failures (the controller was away): a heartbeat now, so the controller does not take
        // the router for silent until the next interval (docs/agent.md, "When the controller is down").
        if (this.failures > 0)
          this.heartbeatOnce().catch((err: Error) =>
            this.log.warn({ err: err.message }, 'heartbeat after the outage failed; the next one tells'),
          );
        this.failures = 0;
        if ((!this.longPoll.held || wait === 0) && !this.wakeNow) {
          const pause = (this.passes > 1 && !woken ? interval * 1000 : 0) - (Date.now() - t0);
          await this.sleep(Math.max(0, pause), waits);
        }
      } catch (err) {
        if (this.stop.signal.aborted) break;
        if (waking.signal.aborted) continue; // woken in the long poll: a pass now
        this.metrics.passes.inc({ result: 'error' });
        if (err instanceof ControlPlaneError && err.unauthorized) {
          this.log.error(
            { err: err.message, exitCode: UNAUTHORIZED_EXIT },
            'the controller refused the agent token (401): check controlPlane.token against the router (admin router rotate-token); stopping',
          );
          this.fail(UNAUTHORIZED_EXIT);
          break;
        }
        this.failures++;
        const delay = this.client.failureDelay(this.failures);
        this.log.warn(
          { err: (err as Error).message, retryInMs: delay },
          'sync failed; keeping the running config',
        );
        await this.sleep(delay);
      }
    }
  }

  /** One heartbeat (docs/api.md, Agent API): version, uptime in seconds, the mesh public key when there is one. */
  async heartbeatOnce(): Promise<void> {
    let meshPublicKey: string | undefined;
    try {
      const { meshPublicKey: read } = await import('./mesh/key.ts');
      meshPublicKey = await read(this.config.tunnel.configDir);
    } catch {
      // no mesh key yet
    }
    const interval = this.config.controlPlane.heartbeatInterval;
    const conditions = [
      ...(this.passes > 0 ? [this.configApplied()] : []),
      ...(this.faultWatch.known ? [this.birdRunning()] : []),
    ];
    const answer = await this.client.heartbeat({
      version: VERSION,
      uptime: Math.floor((Date.now() - this.started) / 1000),
      ...(meshPublicKey ? { meshPublicKey } : {}),
      // sent only when it is not the default the controller assumes: a controller older than the field
      // refuses a body naming it
      ...(interval !== DEFAULT_HEARTBEAT_INTERVAL_S ? { heartbeatInterval: interval } : {}),
      ...(conditions.length ? { conditions } : {}),
    });
    this.conditionKeys = answer.conditionKeys;
  }

  /**
   * A node condition's message, one line, with its catalogue key and parameters once the controller said
   * it stores them (HeartbeatAck); before that the English alone, which every controller takes.
   */
  private nodeConditionMessage(
    key: ConditionMessageKey,
    params: MessageParams = {},
  ): { message: string; key?: ConditionMessageKey; params?: Record<string, string> } {
    const said = conditionMessage(key, params);
    const message = oneLine(said.message, 4096);
    return this.conditionKeys ? { ...said, message } : { message };
  }

  /**
   * The node condition `BirdRunning`: False while BIRD's control socket refuses or does not answer; the
   * controller then calls the router not Ready (BirdDown) and this pass's sessions ERROR (docs/agent.md).
   */
  birdRunning(): Condition {
    const down = this.faultWatch.birdDown;
    const condition = down
      ? {
          type: 'BirdRunning',
          status: 'False' as const,
          reason: 'BirdDown',
          ...this.nodeConditionMessage('condition.birdDown', {
            socket: this.config.routing.controlSocket,
            error: down,
          }),
        }
      : {
          type: 'BirdRunning',
          status: 'True' as const,
          reason: 'Answering',
          ...this.nodeConditionMessage('condition.birdAnswers'),
        };
    const key = `${condition.status}/${condition.reason}`;
    if (key !== this.birdKey) {
      if (this.birdKey) this.birdSince = new Date().toISOString();
      this.birdKey = key;
    }
    return { ...condition, lastTransitionTime: this.birdSince };
  }

  /**
   * The node condition `ConfigApplied`: False while BIRD refuses a file no session owns (an operator's
   * local.d file, the main config), naming file and line; no session is blamed for it (docs/agent.md).
   */
  configApplied(): Condition {
    const p = this.reconciler.nodeProblem;
    // BIRD's message names file and line itself (`<file>:<line>:<col> …`); else the file goes first
    const where = p?.file && !p.message.includes(p.file) ? `${p.file}${p.line ? `:${p.line}` : ''}: ` : '';
    const condition = p
      ? {
          type: 'ConfigApplied',
          status: 'False' as const,
          reason: p.reason,
          ...this.nodeConditionMessage('condition.configRefused', { where, error: p.message }),
        }
      : {
          type: 'ConfigApplied',
          status: 'True' as const,
          reason: 'Applied',
          ...this.nodeConditionMessage('condition.configApplied'),
        };
    const key = `${condition.status}/${condition.reason}/${condition.message}`;
    if (key !== this.conditionKey) {
      if (this.conditionKey) this.conditionSince = new Date().toISOString();
      this.conditionKey = key;
    }
    return { ...condition, lastTransitionTime: this.conditionSince };
  }

  /** One metric report (docs/api.md, Agent API); the RTTs also feed the latency community of the next pass. */
  async reportMetricsOnce(): Promise<ReportBody | undefined> {
    if (this.passes === 0) return undefined;
    const report = await collectMetrics(this.sessions, this.bird, this.config.metric);
    for (const r of report.sessions) this.reconciler.rtt.set(r.uuid, r.rtt);
    this.lastReport = report;
    await this.client.report(report);
    return report;
  }

  /** One mesh status report (docs/api.md, Agent API): each mesh peer of the last pass's answer; none without a mesh. */
  async reportMeshOnce(): Promise<MeshStatusBody | undefined> {
    const body = await this.reconciler.meshStatus();
    if (body) await this.client.meshStatus(body);
    return body;
  }

  /** The local server's /health: each check with a precise reason when it fails. */
  async health(): Promise<Health> {
    const birdReason = await this.bird.check();
    const limitS = Math.max(
      3 * this.config.controlPlane.heartbeatInterval,
      2 * this.config.controlPlane.syncInterval,
    );
    const sinceContact = Date.now() - this.client.lastContact;
    const controllerReason = this.client.lastError
      ? `controller ${this.config.controlPlane.url}: ${this.client.lastError}`
      : this.client.lastContact === 0
        ? `no answer from the controller ${this.config.controlPlane.url} yet`
        : sinceContact >= limitS * 1000
          ? `no answer from the controller for ${Math.round(sinceContact / 1000)} s (limit ${limitS} s)`
          : undefined;
    const node = this.configApplied();
    const check = (reason: string | undefined): HealthCheck =>
      reason ? { ok: false, reason } : { ok: true };
    const checks = {
      bird: check(birdReason && `BIRD control socket ${this.config.routing.controlSocket}: ${birdReason}`),
      controller: check(controllerReason),
      config: check(node.status === 'False' ? node.message : undefined),
    };
    return {
      ok: checks.bird.ok && checks.controller.ok && checks.config.ok,
      bird: checks.bird.ok,
      controller: checks.controller.ok,
      checks,
      version: VERSION,
      uptime: Math.floor((Date.now() - this.started) / 1000),
    };
  }
}
