/**
 * The agent's level-triggered reconcile (docs/agent.md): the desired state (sessions, routing policy and
 * mesh from the controller) against the actual state read from the node on every pass (links, WireGuard
 * peers, rendered files, BIRD protocols), in named steps (mesh-step.ts, then steps.ts: render, apply,
 * tunnels, reconnect, judge, report, retry), each handing its typed result to the next. Only what
 * differs is changed; one BIRD configure at most; a status is reported only when it differs from what
 * the controller has. In-memory state is limited to timing (retry backoff, grace periods), what was
 * last said (reports, the mesh answer), and measurements (RTT).
 */
import type { AgentSession, BirdConfigResponse, MeshStatusBody } from '../../common/agent-api.ts';
import { HANDSHAKE_FRESH_S, type NodeProblem } from './decisions.ts';
import { wantsUp } from './desired.ts';
import { MeshStep, NO_MESH } from './mesh-step.ts';
import {
  apply,
  judge,
  reconnect,
  render,
  report,
  retry,
  tunnels,
  type PassInput,
  type PassResult,
  type ReconcileDeps,
  type ReconcileMemory,
} from './steps.ts';

export type { PassResult, ReconcileDeps } from './steps.ts';

export class NodeReconciler {
  private readonly deps: ReconcileDeps;
  private readonly memory: ReconcileMemory = {
    retry: new Map(),
    sessions: new Map(),
    reported: new Map(),
    rtt: new Map(),
    node: undefined,
    birdUnreachable: undefined,
    wantedLinks: new Set(),
    judgedBgp: new Map(),
    endpoints: new Map(),
  };
  /** When the last pass began (epoch ms): a handshake deadline before it has been judged. */
  private lastPassAt = 0;
  /** The first step of every pass on a router that takes part in the mesh (deps.mesh). */
  private readonly mesh: MeshStep | undefined;

  constructor(deps: ReconcileDeps) {
    this.deps = deps;
    const { config, wireguard, log, mesh } = deps;
    this.mesh = mesh && new MeshStep({ config, wireguard, source: mesh, log: log.child({ part: 'mesh' }) });
  }

  /** The status of the mesh peers the last pass knew (POST /agent/:router/mesh/status); undefined without. */
  meshStatus(): Promise<MeshStatusBody | undefined> {
    return this.mesh?.status() ?? Promise.resolve(undefined);
  }

  /** uuid → last measured RTT in ms (the metrics loop writes it), for the latency community. */
  get rtt(): Map<string, number | null> {
    return this.memory.rtt;
  }

  /** The refusal of the node's own files (local.d, the main config) that the last apply met, if any. */
  get nodeProblem(): NodeProblem | undefined {
    return this.memory.node;
  }

  /** The links the last pass wanted up: the agent runs a pass when one of them is deleted. */
  get wantedLinks(): ReadonlySet<string> {
    return this.memory.wantedLinks;
  }

  /** Protocol name → the BGP state the last pass judged its session by. */
  get judgedBgp(): ReadonlyMap<string, string> {
    return this.memory.judgedBgp;
  }

  /**
   * When the first session's last handshake passes WireGuard's reject time (epoch ms), unless a newer one
   * comes: a pass then judges its tunnel dead (the fault watch wakes one). Sessions whose BGP is already
   * down count too: BGP's hold timer runs out before the reject time, and the pass at the deadline turns
   * their BGP hint into the WireGuard one. A deadline a pass has already seen is left out, so that a long
   * dead tunnel does not hide the next one's.
   */
  get handshakeDeadline(): number | undefined {
    let first: number | undefined;
    for (const m of this.memory.sessions.values()) {
      if (!m.lastHandshake) continue;
      const at = (m.lastHandshake + HANDSHAKE_FRESH_S) * 1000;
      if (at <= this.lastPassAt) continue;
      if (first === undefined || at < first) first = at;
    }
    return first;
  }

  async pass(sessions: readonly AgentSession[], policy: BirdConfigResponse): Promise<PassResult> {
    const now = this.deps.now?.() ?? Date.now();
    this.lastPassAt = now;
    const input: PassInput = {
      deps: this.deps,
      memory: this.memory,
      now,
      sessions,
      up: sessions.filter(wantsUp),
      policy,
    };
    const stepMs: Record<string, number> = {};
    const timed = async <T>(name: string, step: () => Promise<T> | T): Promise<T> => {
      const started = performance.now();
      const result = await step();
      stepMs[name] = Math.round((performance.now() - started) * 10) / 10;
      return result;
    };
    const mesh = this.mesh;
    const meshed = mesh ? await timed('mesh', () => mesh.run(policy)) : NO_MESH;
    const rendered = await timed('render', () => render(input, meshed.interfaces));
    const applied = await timed('apply', () => apply(input, rendered));
    const made = await timed('tunnels', () => tunnels(input, rendered.waiting, meshed.tunnels));
    // later steps' findings over earlier ones', as each step saw the session last
    const failed = new Map([...rendered.failed, ...applied.failed, ...made.failed]);
    const protocols = await timed('reconnect', () => reconnect(input, failed, made, applied));
    const verdicts = await timed('judge', () =>
      judge(input, {
        links: made.links,
        protocols,
        failed,
        recreated: made.recreated,
        birdFailed: applied.result.failure !== undefined,
      }),
    );
    const reports = await timed('report', () => report(input, verdicts));
    await timed('retry', () => retry(input, failed, rendered.waiting));
    for (const [uuid, failure] of failed)
      if (failure.reason !== 'RetryPending')
        this.deps.log.warn(
          { session: uuid, reason: failure.reason, err: failure.message },
          'session setup failed; retried after its backoff',
        );
    return {
      interfacesChanged: made.changed,
      interfacesRemoved: made.removed,
      writes: applied.result.writes,
      configured: applied.result.configured,
      reports,
      failed: new Map([...failed].map(([uuid, failure]) => [uuid, failure.message])),
      node: this.memory.node,
      birdUnreachable: this.memory.birdUnreachable,
      stepMs,
    };
  }
}
