/**
 * Where the time from an approval to BGP Established goes, read from what the parts themselves record:
 * the agent's `pass applied changes` log line (when the long poll was answered, the policy fetch, each
 * reconcile step), the router BIRD's log (`Reconfiguring` / `Reconfigured`) and the user BIRD's log
 * (BGP events and states, `debug { states, events }`). Both BIRDs log with millisecond timestamps
 * (`timeformat log iso long ms`); every process runs on the same clock.
 */

/** BIRD log lines, as the lab configures them: `log "<file>" all; timeformat log iso long ms;`. */
export const BIRD_LOG_OPTIONS = (file: string) => `log "${file}" all;\ntimeformat log iso long ms;\n`;

/** The user's BGP protocols log their connection events and state changes. */
export const BGP_DEBUG = 'debug { states, events };';

export interface LogLine {
  /** Epoch ms. */
  at: number;
  text: string;
}

/** `2026-11-26 01:02:03.456 <INFO> Reconfigured` → { at, text: 'Reconfigured' } (local time, as BIRD prints). */
export function birdLogLines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}\.\d{3}) <\w+> (.*)$/.exec(line);
    if (m) out.push({ at: new Date(`${m[1]}T${m[2]}`).getTime(), text: m[3]! });
  }
  return out;
}

/** What the agent logs after a pass that changed tunnels or BIRD's files (agent/agent.ts). */
export interface AgentPass {
  /** Epoch ms of the log line (the pass's end). */
  at: number;
  answeredAt: number;
  policyMs: number;
  stepMs: Record<string, number>;
}

export function agentPasses(output: readonly string[]): AgentPass[] {
  const passes: AgentPass[] = [];
  for (const line of output.join('').split('\n')) {
    if (!line.includes('"pass applied changes"')) continue;
    try {
      const j = JSON.parse(line) as { time: number } & Omit<AgentPass, 'at'>;
      passes.push({ at: j.time, answeredAt: j.answeredAt, policyMs: j.policyMs, stepMs: j.stepMs });
    } catch {
      // a line cut by the output buffer
    }
  }
  return passes;
}

export interface Phase {
  name: string;
  ms: number;
}

export interface SetupTimeline {
  phases: Phase[];
  /** Who opened the BGP connection that came up, and what BIRD said about connecting before it. */
  notes: string[];
}

export interface TimelineInput {
  /** Epoch ms the approve command started: no record of this setup is older. */
  askedAt: number;
  /** Epoch ms the approve command returned: the clock starts here. */
  approvedAt: number;
  agentOutput: readonly string[];
  routerBirdLog: string;
  userBirdLog: string;
  /** The user's BGP protocols that must be Established (the IPv4 one too for a peer without MP-BGP). */
  protocols: readonly string[];
}

/** The phases, in order, each from the end of the one before; missing records are named in `notes`. */
export function setupTimeline(input: TimelineInput): SetupTimeline {
  const notes: string[] = [];
  const pass = agentPasses(input.agentOutput).find((p) => p.answeredAt >= input.askedAt);
  // the configure of that pass: the first one after it had the sessions
  const router = birdLogLines(input.routerBirdLog).filter((l) => l.at >= (pass?.answeredAt ?? Infinity));
  const reconfiguring = router.find((l) => l.text === 'Reconfiguring');
  const reconfigured = router.find((l) => l.text === 'Reconfigured' && l.at >= (reconfiguring?.at ?? 0));
  const user = birdLogLines(input.userBirdLog).filter((l) => l.at >= input.askedAt);
  if (!pass || !reconfiguring || !reconfigured) {
    notes.push(
      `missing records: ${[!pass && 'the agent pass line', !reconfiguring && 'Reconfiguring', !reconfigured && 'Reconfigured'].filter(Boolean).join(', ')}`,
    );
    return { phases: [], notes };
  }
  const ups = input.protocols.map((p) => user.find((l) => l.text === `${p}: State changed to up`));
  if (ups.some((u) => !u)) {
    notes.push('missing records: the user BIRD did not log Established');
    return { phases: [], notes };
  }
  const established = Math.max(...ups.map((u) => u!.at));
  // the connection that came up: the last connect of the last protocol to come up, before it did
  const last = input.protocols[ups.findIndex((u) => u!.at === established)]!;
  const connects = user.filter(
    (l) =>
      l.at <= established &&
      l.text.startsWith(`${last}: `) &&
      (l.text.endsWith(': Connected') || /Incoming connection .* accepted$/.test(l.text)),
  );
  const connected = connects.at(-1);
  const s = pass.stepMs;
  // the pass's steps in order (agent/reconcile/node-reconciler.ts): mesh, render, apply, tunnels
  const applyStart = pass.answeredAt + pass.policyMs + (s.mesh ?? 0) + (s.render ?? 0);
  const tunnelsEnd = applyStart + (s.apply ?? NaN) + (s.tunnels ?? NaN);
  const phases: Phase[] = [
    {
      name: 'long-poll wake (approval answered → agent has the sessions)',
      ms: pass.answeredAt - input.approvedAt,
    },
    { name: 'fetch the routing policy (and the mesh step)', ms: pass.policyMs + (s.mesh ?? 0) },
    { name: 'render', ms: s.render ?? NaN },
    { name: 'bird -p check and swap', ms: reconfiguring.at - applyStart },
    { name: 'configure', ms: reconfigured.at - reconfiguring.at },
    { name: 'tunnel up (wireguard-go)', ms: tunnelsEnd - reconfigured.at },
    {
      name: 'BGP connect (incl. WireGuard handshake, connect delay)',
      ms: (connected?.at ?? NaN) - tunnelsEnd,
    },
    { name: 'OPEN → Established', ms: established - (connected?.at ?? NaN) },
  ];
  if (connected)
    notes.push(
      connected.text.includes('Incoming')
        ? `${last}: the router connected (the user's BIRD accepted)`
        : `${last}: the user's BIRD connected`,
    );
  const tried = user.filter(
    (l) =>
      l.at <= established && /Connect delayed|Connecting to|Connection (lost|closed)|rejected/.test(l.text),
  );
  for (const l of tried) notes.push(`${((l.at - input.approvedAt) / 1000).toFixed(2)} s: ${l.text}`);
  return { phases, notes };
}

/** The median of each phase over several setups, in the phases' order. */
export function phaseMedians(timelines: readonly SetupTimeline[], median: (v: number[]) => number): Phase[] {
  const names = timelines.find((t) => t.phases.length)?.phases.map((p) => p.name) ?? [];
  return names.map((name) => ({
    name,
    ms: median(
      timelines.flatMap((t) =>
        t.phases.filter((p) => p.name === name && Number.isFinite(p.ms)).map((p) => p.ms),
      ),
    ),
  }));
}
