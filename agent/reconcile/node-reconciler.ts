/**
 * The agent's level-triggered reconcile (docs/agent.md): the desired state (sessions and routing policy
 * from the controller) against the actual state read from the node on every pass (links, WireGuard
 * peers, rendered files, BIRD protocols), in named steps (steps.ts: render, apply, tunnels, reconnect,
 * judge, report, retry). Only what differs is changed; one BIRD configure at most; a status is reported only
 * when it differs from what the controller has. In-memory state is limited to timing (retry backoff,
 * grace periods), what was last reported, and measurements (RTT).
 */
import type { AgentSession, BirdConfigResponse } from '../../common/agent-api.ts';
import { HANDSHAKE_FRESH_S, type NodeProblem } from './decisions.ts';
import { wantsUp } from './desired.ts';
import {
  STEPS,
  type PassContext,
  type PassResult,
  type ReconcileDeps,
  type ReconcileMemory,
} from './steps.ts';

export type { PassResult, ReconcileDeps, ReconcileHooks } from './steps.ts';

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
  };
  /** When the last pass began (epoch ms): a handshake deadline before it has been judged. */
  private lastPassAt = 0;

  constructor(deps: ReconcileDeps) {
    this.deps = deps;
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
    const ctx: PassContext = {
      deps: this.deps,
      memory: this.memory,
      now,
      sessions,
      up: sessions.filter(wantsUp),
      policy,
      waiting: new Set(),
      links: new Map(),
      recreated: [],
      peerFiles: new Map(),
      fileOwner: new Map(),
      tree: undefined,
      protocols: new Map(),
      birdError: undefined,
      ranBefore: new Set(),
      applied: undefined,
      verdicts: [],
      result: {
        interfacesChanged: 0,
        interfacesRemoved: 0,
        writes: 0,
        configured: false,
        reports: [],
        failed: new Map(),
        node: undefined,
        birdUnreachable: undefined,
        stepMs: {},
      },
    };
    for (const step of STEPS) {
      const started = performance.now();
      await step.run(ctx);
      ctx.result.stepMs[step.name] = Math.round((performance.now() - started) * 10) / 10;
    }
    return ctx.result;
  }
}
