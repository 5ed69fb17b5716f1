/**
 * The agent's own Prometheus metrics, served at `GET /metrics` by the local server (the same allow-list
 * as /health), so a router can be scraped on its own: sync passes, BIRD configures, whether BIRD and the
 * controller answer, and the per-session figures last measured (the ones reported to the controller).
 * Everything but the pass counters is read from the agent's state when Prometheus scrapes.
 */
import { Counter, Gauge, Histogram, Registry } from './metrics-registry.ts';
import type { AgentSession, ReportBody } from '../common/agent-api.ts';
import { statusName } from '../common/status.ts';
import { VERSION } from '../common/version.ts';

/** What the scrape reads from the running agent. */
export interface AgentState {
  sessions(): readonly AgentSession[];
  lastReport(): ReportBody | undefined;
  configureCalls(): number;
  /** False while BIRD refuses a file no session owns (the node condition ConfigApplied). */
  configApplied(): boolean;
  health(): Promise<{ bird: boolean; controller: boolean }>;
}

export class AgentMetrics {
  readonly registry = new Registry();
  readonly passes: Counter<'result'>;
  readonly passSeconds: Histogram;
  readonly stepSeconds: Counter<'step'>;
  readonly fileWrites: Counter;
  readonly tunnelChanges: Counter;
  readonly linksLost: Counter;

  constructor(state: AgentState) {
    const registers = [this.registry];
    this.passes = new Counter({
      name: 'peerops_agent_sync_passes_total',
      help: 'Sync passes (fetch from the controller, then reconcile), by result',
      labelNames: ['result'] as const,
      registers,
    });
    this.passSeconds = new Histogram({
      name: 'peerops_agent_sync_pass_seconds',
      help: 'Duration of the reconcile step of a sync pass (tunnels, BIRD files, configure)',
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.stepSeconds = new Counter({
      name: 'peerops_agent_sync_step_seconds_total',
      help: 'Time spent in each step of the reconcile (render, apply, tunnels, …): where a pass goes',
      labelNames: ['step'] as const,
      registers,
    });
    this.fileWrites = new Counter({
      name: 'peerops_agent_bird_file_writes_total',
      help: 'BIRD config files the reconcile wrote or removed (0 on a pass with nothing to change)',
      registers,
    });
    this.tunnelChanges = new Counter({
      name: 'peerops_agent_tunnel_changes_total',
      help: 'WireGuard tunnels the reconcile created, changed or removed',
      registers,
    });
    this.linksLost = new Counter({
      name: 'peerops_agent_tunnels_lost_total',
      help: 'Wanted tunnels whose link was deleted between passes (a WireGuard process that crashed, an ip link del)',
      registers,
    });
    new Gauge({
      name: 'peerops_agent_info',
      help: 'The running agent version (value 1)',
      labelNames: ['version'] as const,
      registers,
      collect() {
        this.set({ version: VERSION }, 1);
      },
    });
    new Counter({
      name: 'peerops_agent_bird_configures_total',
      help: 'configure commands sent to BIRD',
      registers,
      collect() {
        this.reset();
        this.inc(state.configureCalls());
      },
    });
    new Gauge({
      name: 'peerops_agent_up',
      help: '1 when the part answers: bird (control socket), controller (recent contact)',
      labelNames: ['part'] as const,
      registers,
      async collect() {
        const h = await state.health();
        this.set({ part: 'bird' }, h.bird ? 1 : 0);
        this.set({ part: 'controller' }, h.controller ? 1 : 0);
      },
    });
    new Gauge({
      name: 'peerops_agent_config_applied',
      help: '0 while BIRD refuses a file no session owns (local.d, the main config): the node condition ConfigApplied',
      registers,
      collect() {
        this.set(state.configApplied() ? 1 : 0);
      },
    });
    new Gauge({
      name: 'peerops_agent_sessions',
      help: "This router's sessions by status (the agent's last report, else the controller's)",
      labelNames: ['status'] as const,
      registers,
      collect() {
        this.reset();
        const counts = new Map<string, number>();
        for (const s of state.sessions()) {
          const status = statusName(s.status);
          counts.set(status, (counts.get(status) ?? 0) + 1);
        }
        for (const [status, n] of counts) this.set({ status }, n);
      },
    });
    // Per session, from the last measurement: one series per session (bounded by the router's sessions).
    const perSession = (
      name: string,
      help: string,
      value: (m: ReportBody['sessions'][number]) => number | null,
    ) =>
      new Gauge({
        name,
        help,
        labelNames: ['interface', 'asn'] as const,
        registers,
        collect() {
          this.reset();
          const byUuid = new Map(state.sessions().map((s) => [s.uuid, s]));
          for (const m of state.lastReport()?.sessions ?? []) {
            const s = byUuid.get(m.uuid);
            const v = value(m);
            if (s && v !== null) this.set({ interface: s.interface, asn: String(s.asn) }, v);
          }
        },
      });
    perSession(
      'peerops_agent_session_rtt_seconds',
      'Ping RTT through the tunnel (absent when unanswered)',
      (m) => (m.rtt === null ? null : m.rtt / 1000),
    );
    perSession(
      'peerops_agent_session_receive_bytes',
      'Bytes received on the tunnel (WireGuard counter)',
      (m) => m.rxBytes,
    );
    perSession(
      'peerops_agent_session_transmit_bytes',
      'Bytes sent on the tunnel (WireGuard counter)',
      (m) => m.txBytes,
    );
    perSession(
      'peerops_agent_session_routes_imported',
      'Routes BIRD imported from the peer',
      (m) => m.routesImported,
    );
  }
}
