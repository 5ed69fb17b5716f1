/**
 * The steps of one reconcile pass, run in this order by NodeReconciler (node-reconciler.ts): mesh
 * (mesh-step.ts) → render → apply → tunnels → reconnect → judge → report → retry. Each step is a
 * function from the pass's input and what the steps before it found to a typed result of its own; a
 * session's setup failure is a SetupFailure with its reason. The steps do the I/O; what they decide
 * comes from decisions.ts. One file over 500 lines: the steps read in the order a pass runs them, and
 * share the pass's types.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { mapLimit } from '../../common/concurrency.ts';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import { oneLine } from '../../common/text.ts';
import { readTextIfExists, readTextsIfExist } from '../../common/read-file.ts';
import type { ApplyResult, BirdApplier, DesiredTree } from '../bird/apply.ts';
import type { BirdControl, ProtocolInfo } from '../bird/control.ts';
import { renderIbgpConfigs } from '../bird/ibgp.ts';
import { renderMainConfig } from '../bird/main-config.ts';
import { sessionProtocols } from '../bird/names.ts';
import { peerFileName, peerView, renderPeerConfig } from '../bird/peer-config.ts';
import { renderAdoptedPeer } from '../adopt/kept-protocol.ts';
import { type Adoption } from '../adopt/takeover.ts';
import { definedNames, REMAINDER_FILE } from '../adopt/remainder.ts';
import type { AgentConfig } from '../config.ts';
import { EndpointRefused, resolveEndpoint, type Resolve } from '../../common/endpoint-resolve.ts';
import type { WgInterfaceState } from '../wireguard/read.ts';
import type { WireGuard } from '../wireguard/types.ts';
import {
  bgpStateOf,
  blame,
  endpointToSet,
  judge as judgeSession,
  nextRetry,
  retryDecision,
  sessionFingerprint,
  type NodeProblem,
  type RetryEntry,
  type SessionMemory,
} from './decisions.ts';
import { sessionInterfaceSpec, sessionLinkName, wantsUp } from './desired.ts';
import type { MeshSource } from './mesh-step.ts';

/**
 * Where the pass's status reports go: the controller's agent API (sync/client.ts, POST
 * /agent/:router/modify), a port the reconciler owns as it owns WireGuard's and BIRD's.
 */
export interface StatusReporter {
  /** Sends one session's status report; resolves when the controller took it. */
  modify(body: ModifyBody): Promise<unknown>;
}

export interface ReconcileDeps {
  config: AgentConfig;
  bird: Pick<BirdControl, 'protocols' | 'restartProtocol'>;
  applier: Pick<BirdApplier, 'apply' | 'mainPath'>;
  wireguard: WireGuard;
  reporter: StatusReporter;
  log: Logger;
  /** The controller's mesh answer, on a router that takes part in the mesh (main.ts): the mesh step runs. */
  mesh?: MeshSource;
  /** Custom eBGP template text (routing.ebgpConfTemplateFile), read by the caller. */
  template?: () => Promise<string | undefined>;
  /** How long a configured session may be without BGP Established before it is ERROR. */
  graceMs?: number;
  /** The clock (epoch ms). */
  now?: () => number;
  /** Resolves session endpoints given by name (endpoint.ts; the system's resolver by default). */
  resolve?: Resolve;
  /** The takeover of adopted sessions (adopt/takeover.ts); without it an adopted session fails its setup. */
  adoption?: Adoption;
}

/** What the reconciler keeps between passes: timing and what it last said, nothing about the node. */
export interface ReconcileMemory {
  retry: Map<string, RetryEntry>;
  sessions: Map<string, SessionMemory>;
  /** uuid → the last report the controller took (status, message, BGP state), to send only changes. */
  reported: Map<string, string>;
  /** uuid → last measured RTT in ms (metrics loop), for the latency community. */
  rtt: Map<string, number | null>;
  /** The node-level refusal of the last apply, until an apply succeeds. */
  node: NodeProblem | undefined;
  /** BIRD did not answer on the last apply (the message), until it does. */
  birdUnreachable: string | undefined;
  /** The links the last pass wanted up (sessions' and mesh tunnels): a loss of one needs a pass. */
  wantedLinks: ReadonlySet<string>;
  /** Protocol name → the BGP state the last judge saw: the fault watch runs a pass when BIRD's differs. */
  judgedBgp: ReadonlyMap<string, string>;
  /** Session link → the endpoint a pass last wanted WireGuard to have (decisions.ts, endpointToSet). */
  endpoints: Map<string, string>;
}

export interface PassResult {
  interfacesChanged: number;
  interfacesRemoved: number;
  writes: number;
  configured: boolean;
  reports: ModifyBody[];
  /** uuid → why this session's setup failed this pass. */
  failed: Map<string, string>;
  /** A refusal no session caused (local.d, the main config), reported as a node condition. */
  node: NodeProblem | undefined;
  /** Why BIRD could not be asked, when it could not. */
  birdUnreachable: string | undefined;
  /** How long each step took (ms), by step name: the agent logs it with every pass that changed something. */
  stepMs: Record<string, number>;
}

/**
 * Why a session's setup failed this pass, as a Flux reconciler's error carries its reason: the message
 * is what the session's status report says.
 */
export type SetupFailureReason =
  /** An earlier failure's backoff has not run out: the session is left as it is on the node. */
  | 'RetryPending'
  | 'RenderFailed'
  /** BIRD's check refused the session's own file. */
  | 'ConfigRejected'
  | 'EndpointRefused'
  | 'TunnelFailed'
  /** An adopted session whose hand-made protocol or link could not be read for the takeover. */
  | 'TakeoverFailed';

export class SetupFailure extends Error {
  readonly reason: SetupFailureReason;
  constructor(reason: SetupFailureReason, message: string) {
    super(message);
    this.name = 'SetupFailure';
    this.reason = reason;
  }
}

/** uuid → why that session's setup failed, as one step found it. */
export type Failures = Map<string, SetupFailure>;

/** What every step of a pass is given: its dependencies, what the reconciler remembers, the desired state. */
export interface PassInput {
  deps: ReconcileDeps;
  memory: ReconcileMemory;
  now: number;
  sessions: readonly AgentSession[];
  /** The sessions whose tunnel and BGP should exist (desired.ts wantsUp). */
  up: readonly AgentSession[];
  policy: BirdConfigResponse;
}

/** BIRD's protocols as last read this pass, or why they could not be (the judge says so). */
export interface BirdProtocols {
  byName: ReadonlyMap<string, ProtocolInfo>;
  error: string | undefined;
}

export interface Rendered {
  /** Failed setups waiting for their retry: left exactly as they are on the node. */
  waiting: ReadonlySet<string>;
  failed: Failures;
  /** Peer file name → content: the tree's peerConfDir files. */
  peerFiles: ReadonlyMap<string, string>;
  /** Live path of a session's BIRD file → its uuid. */
  fileOwner: ReadonlyMap<string, string>;
  tree: DesiredTree;
}

export interface Applied {
  result: ApplyResult;
  failed: Failures;
  /** The protocols BIRD ran before this pass's configure. */
  ranBefore: ReadonlySet<string>;
  protocols: BirdProtocols;
}

export interface Tunnels {
  links: ReadonlyMap<string, WgInterfaceState>;
  /** Sessions whose tunnel was made anew under a BGP session BIRD may already run. */
  recreated: readonly AgentSession[];
  changed: number;
  removed: number;
  failed: Failures;
}

const SESSION_PREFIX = 'wg_';
/** The links the agent names itself; any other `wg_*` link is left alone unless a takeover made it the agent's. */
const OWN_LINK = /^wg_[0-9]{1,5}$/;
/** The BIRD files the agent names itself in peerConfDir; an operator's other files there are left alone. */
const OWN_PEER_FILE = /^dn42_[0-9]{1,5}\.conf$/;
/**
 * Tunnels set up (or removed) at once. A tunnel's setup is mostly waiting (wireguard-go starting, ip and
 * wg commands), so a bound of 8 keeps two cores busy without a burst of hundreds of processes.
 */
export const TUNNELS_IN_PARALLEL = 8;
/** Status reports in flight at once (the controller takes each as a write). */
export const REPORTS_IN_PARALLEL = 4;

/** Render: one BIRD file per session (a failed or waiting one keeps its file on disk), the main config, iBGP. */
export async function render(input: PassInput, meshInterfaces: readonly string[]): Promise<Rendered> {
  const { deps, memory, policy, up } = input;
  const { config } = deps;
  const waiting = new Set<string>();
  const failed: Failures = new Map();
  for (const s of up) {
    const entry = memory.retry.get(s.uuid);
    const decision = retryDecision(entry, sessionFingerprint(s), input.now);
    if (decision === 'forget') memory.retry.delete(s.uuid);
    if (decision === 'wait' && entry) {
      waiting.add(s.uuid);
      failed.set(s.uuid, new SetupFailure('RetryPending', entry.message));
    }
  }
  const main = (dirs: Record<string, string>) =>
    renderMainConfig(
      policy,
      {
        peerConfDir: dirs.peerConfDir ?? config.routing.peerConfDir,
        ibgpConfDir: dirs.ibgpConfDir ?? config.routing.ibgpConfDir,
        controlSocket: config.routing.controlSocket,
      },
      { meshInterfaces: [...meshInterfaces] },
    );
  // the takeover reads what adopted sessions keep before their first render (docs/agent.md)
  const adopted = up.filter((s) => s.adopted && !waiting.has(s.uuid));
  if (adopted.length) {
    const refused = deps.adoption
      ? await deps.adoption.takeOver(adopted, definedNames(main({})))
      : new Map(adopted.map((s) => [s.uuid, 'this agent takes no adopted session over']));
    for (const [uuid, message] of refused) failed.set(uuid, new SetupFailure('TakeoverFailed', message));
  }
  const template = await deps.template?.();
  const onDisk = readTextsIfExist(config.routing.peerConfDir, up.map(peerFileName));
  const peerFiles = new Map<string, string>();
  const fileOwner = new Map<string, string>();
  for (const s of up) {
    const name = peerFileName(s);
    fileOwner.set(join(config.routing.peerConfDir, name), s.uuid);
    const text = onDisk.get(name);
    if (waiting.has(s.uuid) || failed.has(s.uuid)) {
      if (text !== undefined) peerFiles.set(name, text);
      continue;
    }
    try {
      const rtt = memory.rtt.has(s.uuid) ? memory.rtt.get(s.uuid) : latencyFromFile(text);
      const a = s.adopted;
      const kept = a && (await deps.adoption?.link(a.interface));
      if (a && kept) peerFiles.set(name, renderAdoptedPeer(s, a, kept, policy, rtt));
      else peerFiles.set(name, renderPeerConfig(peerView(s, policy, rtt, config.tunnel.dn42Ipv4), template));
    } catch (err) {
      if (text !== undefined) peerFiles.set(name, text);
      const running = s.status === SessionStatus.ACTIVE || s.status === SessionStatus.ERROR;
      // A running session keeps the file BIRD runs; only setups that need a new file fail.
      if (running && text !== undefined)
        deps.log.warn(
          { session: s.uuid, err: (err as Error).message },
          'cannot render; keeping the running file',
        );
      else failed.set(s.uuid, new SetupFailure('RenderFailed', (err as Error).message));
    }
  }
  // the hand-made protocols a takeover left running, in the same swap (adopt/remainder.ts)
  const remainder = await deps.adoption?.remainder();
  if (remainder !== undefined) peerFiles.set(REMAINDER_FILE, remainder);
  const tree: DesiredTree = {
    main,
    dirs: [
      {
        key: 'peerConfDir',
        dir: config.routing.peerConfDir,
        files: peerFiles,
        onDisk,
        owns: (f) => OWN_PEER_FILE.test(f) || f === REMAINDER_FILE,
      },
      { key: 'ibgpConfDir', dir: config.routing.ibgpConfDir, files: renderIbgpConfigs(policy) },
    ],
    setAside: (await deps.adoption?.pendingSetAside()) ?? [],
  };
  return { waiting, failed, peerFiles, fileOwner, tree };
}

/**
 * Apply: the tree checked and swapped in, one configure. A refusal naming a session's file fails that
 * session and the rest goes ahead without its change; a refusal no session caused is the node's.
 */
export async function apply(input: PassInput, rendered: Rendered): Promise<Applied> {
  const { deps, memory } = input;
  const failed: Failures = new Map();
  // BIRD must run what the files say: a protocol set that differs (BIRD restarted on other files), or a
  // node problem that may have been mended meanwhile, forces one configure even when the files match.
  const protocols = await readProtocols(deps);
  const ranBefore = new Set(protocols.byName.keys());
  const mainNames = (ss: readonly AgentSession[]) => ss.map((s) => sessionProtocols(s)[0]);
  const wantProtocols = mainNames(input.up.filter((s) => rendered.peerFiles.has(peerFileName(s)))).sort();
  const kept = new Set(mainNames(input.up.filter((s) => s.adopted)));
  const haveProtocols = [...protocols.byName.keys()]
    .filter((n) => /^dn42_\d+$/.test(n) || kept.has(n))
    .sort();
  const forceConfigure =
    (protocols.byName.size > 0 && wantProtocols.join() !== haveProtocols.join()) || memory.node !== undefined;

  // Names of sessions set up now (no file on disk yet): one taken by an operator's local.d file fails
  // that setup, not the node.
  const onDisk = rendered.tree.dirs.find((d) => d.key === 'peerConfDir')?.onDisk;
  const setupNames = new Map(
    input.up
      .filter((s) => onDisk?.get(peerFileName(s)) === undefined)
      .flatMap((s) => sessionProtocols(s).map((n) => [n, s.uuid])),
  );
  const blameOf = (failure: ApplyResult['failure']) =>
    failure && blame(failure, rendered.fileOwner, deps.applier.mainPath, setupNames);
  // A takeover is one step (docs/agent.md, Taking the peers over): while an adopted session could not be
  // read or rendered, nothing moves and nothing is written, since the agent's main file would drop the
  // hand-made protocol that session still runs on.
  const takeover = (rendered.tree.setAside?.length ?? 0) > 0;
  if (takeover && input.up.some((s) => s.adopted && rendered.failed.has(s.uuid)))
    return { result: { writes: 0, configured: false, changed: [] }, failed, ranBefore, protocols };
  let applied = await deps.applier.apply(rendered.tree, { forceConfigure });
  let verdict = blameOf(applied.failure);
  if (takeover && applied.failure?.stage === 'check' && verdict?.sessions.length) {
    // no other session goes ahead without the refused one; the refused one is read again next time
    const refused = input.up.filter((s) => verdict?.sessions.includes(s.uuid));
    await deps.adoption?.forget(refused, definedNames(rendered.tree.main({})));
  } else if (applied.failure?.stage === 'check' && verdict?.sessions.length) {
    // The check named a session's file: that session fails, the others go ahead without its change.
    const peerFiles = new Map(rendered.peerFiles);
    for (const uuid of verdict.sessions) {
      failed.set(uuid, new SetupFailure('ConfigRejected', applied.failure.message));
      // every session set up this pass owns a file (render); blame names no other
      const path = [...rendered.fileOwner].find(([, u]) => u === uuid)?.[0];
      if (path === undefined) continue;
      const name = path.slice(path.lastIndexOf('/') + 1);
      const text = await readTextIfExists(path);
      if (text !== undefined) peerFiles.set(name, text);
      else peerFiles.delete(name);
    }
    const tree: DesiredTree = {
      ...rendered.tree,
      dirs: rendered.tree.dirs.map((d) => (d.key === 'peerConfDir' ? { ...d, files: peerFiles } : d)),
    };
    applied = await deps.applier.apply(tree, { forceConfigure });
    verdict = blameOf(applied.failure);
  }
  const failure = applied.failure;
  if (failure?.unreachable) {
    if (memory.birdUnreachable !== failure.message)
      deps.log.warn(
        { err: failure.message },
        'BIRD does not answer; the configuration is applied when it does',
      );
    memory.birdUnreachable = failure.message;
  } else memory.birdUnreachable = undefined;
  if (failure && verdict && !failure.unreachable) {
    for (const uuid of verdict.sessions)
      failed.set(uuid, new SetupFailure('ConfigRejected', failure.message));
    // Once per refusal, not once per pass: the node condition carries it on.
    if (verdict.node && memory.node?.message !== verdict.node.message)
      deps.log.error(
        { stage: failure.stage, file: verdict.node.file, line: verdict.node.line, message: failure.message },
        'BIRD refused the configuration because of a file no session owns; no session is blamed',
      );
    else if (!verdict.node)
      deps.log.error(
        { stage: failure.stage, message: failure.message, sessions: verdict.sessions },
        'BIRD refused the configuration',
      );
  }
  if (!failure?.unreachable) memory.node = verdict?.node;
  return { result: applied, failed, ranBefore, protocols };
}

/**
 * Tunnels: every wanted session link made to match its spec; unwanted `wg_*` links removed (the mesh
 * step owns the `wgm_*` ones). After apply: BIRD already runs the session, waiting for its neighbor,
 * when the link comes up, so the peer's first connection (its SYN held by its WireGuard until the
 * router's keepalive completes the handshake) is accepted at once instead of waiting for BIRD's connect
 * delay.
 */
export async function tunnels(
  input: PassInput,
  waiting: ReadonlySet<string>,
  meshTunnels: readonly string[],
): Promise<Tunnels> {
  const { deps, up } = input;
  const failed: Failures = new Map();
  const recreated: AgentSession[] = [];
  let changed = 0;
  let removed = 0;
  const wanted = new Set(up.map(sessionLinkName));
  const { endpoints } = input.memory;
  input.memory.wantedLinks = new Set([...wanted, ...meshTunnels]);
  // the agent's links: its own names, and the hand-made ones taken over; never another link
  const taken = new Set((await deps.adoption?.linkNames()) ?? []);
  const prefixes = [SESSION_PREFIX, ...taken];
  const ours = (all: Map<string, WgInterfaceState>) =>
    new Map([...all].filter(([name]) => OWN_LINK.test(name) || taken.has(name)));
  let links = ours(await deps.wireguard.readAll(prefixes));
  // Each session's tunnel on its own: a failure is that session's only.
  const ensured = await mapLimit(
    up.filter((s) => !waiting.has(s.uuid)),
    TUNNELS_IN_PARALLEL,
    async (s) => {
      try {
        // the address WireGuard gets, judged as the controller judges endpoints (docs/agent.md)
        const endpoint =
          s.endpoint &&
          (await resolveEndpoint(s.endpoint, input.policy.allowPrivateEndpoints ?? false, deps.resolve));
        const a = s.adopted;
        const kept = a && (await deps.adoption?.link(a.interface));
        if (a && !kept) return { s };
        const spec = sessionInterfaceSpec({ ...s, endpoint }, deps.config, kept);
        const link = links.get(spec.name);
        // a link of another generation is made anew, and its peer with the endpoint given
        const peer =
          link?.generation === spec.generation
            ? link.wg?.peers.find((p) => p.publicKey === spec.peer.publicKey)
            : undefined;
        const given = endpointToSet(spec.peer.endpoint, endpoints.get(spec.name), peer, input.now / 1000);
        const { endpoint: _configured, ...peerWithout } = spec.peer;
        const r = await deps.wireguard.ensure(
          { ...spec, peer: given === undefined ? peerWithout : { ...peerWithout, endpoint: given } },
          link ?? null,
        );
        if (spec.peer.endpoint) endpoints.set(spec.name, spec.peer.endpoint);
        return { s, r };
      } catch (err) {
        return { s, err: err as Error };
      }
    },
  );
  for (const { s, r, err } of ensured) {
    if (err)
      failed.set(
        s.uuid,
        new SetupFailure(err instanceof EndpointRefused ? 'EndpointRefused' : 'TunnelFailed', err.message),
      );
    if (!r) continue;
    if (r.created) recreated.push(s);
    if (r.changes.length) {
      changed++;
      deps.log.info({ session: s.uuid, interface: sessionLinkName(s), changes: r.changes }, 'tunnel changed');
    }
  }
  const unwanted = [...links.keys()].filter((name) => !wanted.has(name));
  for (const name of endpoints.keys()) if (!wanted.has(name)) endpoints.delete(name);
  await mapLimit(unwanted, TUNNELS_IN_PARALLEL, async (name) => {
    await deps.wireguard.remove(name);
    removed++;
    deps.log.info({ interface: name }, 'removed tunnel no session wants');
  });
  if (changed || removed) links = ours(await deps.wireguard.readAll(prefixes));
  return { links, recreated, changed, removed, failed };
}

/**
 * Reconnect: a tunnel made anew under a BGP session BIRD already ran before this pass is restarted now,
 * not after BGP's hold time; then BIRD's protocols are read again for the judge.
 */
export async function reconnect(
  input: PassInput,
  failed: ReadonlyMap<string, SetupFailure>,
  made: Tunnels,
  applied: Applied,
): Promise<BirdProtocols> {
  const { deps } = input;
  for (const s of made.recreated) {
    if (failed.has(s.uuid)) continue;
    for (const name of sessionProtocols(s)) {
      if (!applied.ranBefore.has(name)) continue;
      await deps.bird
        .restartProtocol(name)
        .catch((err: Error) => deps.log.warn({ protocol: name, err: err.message }, 'BGP restart failed'));
    }
  }
  return applied.result.configured || made.recreated.length ? readProtocols(deps) : applied.protocols;
}

/** What the judge weighs for each session, from the steps before it. */
export interface Evidence {
  links: ReadonlyMap<string, WgInterfaceState>;
  protocols: BirdProtocols;
  failed: ReadonlyMap<string, SetupFailure>;
  recreated: readonly AgentSession[];
  /** BIRD refused or could not take this pass's configuration. */
  birdFailed: boolean;
}

/** Judge: each session's status from this pass's failures, BIRD's BGP state and WireGuard's handshake. */
export async function judge(input: PassInput, evidence: Evidence): Promise<ModifyBody[]> {
  const { deps, memory } = input;
  const { links, protocols } = evidence;
  const verdicts: ModifyBody[] = [];
  const ours = { asn: input.policy.dn42Asn, linkLocal: deps.config.tunnel.dn42Ipv6LinkLocal };
  const judgedBgp = new Map<string, string>();
  for (const s of input.sessions) {
    const base = { uuid: s.uuid, interface: s.interface };
    if (s.status === SessionStatus.QUEUED_FOR_DELETE) {
      // Torn down when neither link nor file remains and BIRD accepted the config without it (a removed
      // protocol may still be listed, down, while BIRD flushes its routes).
      const proto = protocols.byName.get(sessionProtocols(s)[0]);
      const file = await readTextIfExists(join(deps.config.routing.peerConfDir, peerFileName(s)));
      const gone = !links.has(sessionLinkName(s)) && file === undefined && (!proto || proto.state !== 'up');
      if (gone && !evidence.birdFailed) verdicts.push({ ...base, status: SessionStatus.DISABLED });
      continue;
    }
    if (!wantsUp(s)) continue;
    const proto = protocols.byName.get(sessionProtocols(s)[0]);
    if (proto) judgedBgp.set(proto.name, proto.bgpState ?? '');
    const peer = links.get(sessionLinkName(s))?.wg?.peers.find((p) => p.publicKey === s.publicKey);
    const v = judgeSession(
      {
        session: s,
        ours,
        failure: evidence.failed.get(s.uuid)?.message,
        protocol: proto ? { bgpState: proto.bgpState, lastError: proto.lastError } : undefined,
        lastHandshake: peer?.latestHandshake ?? 0,
        birdDown: protocols.error,
        tunnelRecreated: evidence.recreated.includes(s),
        memory: memory.sessions.get(s.uuid),
        now: input.now,
      },
      deps.graceMs,
    );
    if (v.memory) memory.sessions.set(s.uuid, v.memory);
    else memory.sessions.delete(s.uuid);
    if (v.status === undefined) continue;
    const body: ModifyBody = { ...base, status: v.status };
    // one printable line: the controller refuses control characters (BIRD's output has newlines)
    if (v.message !== undefined) body.message = oneLine(v.message, 4096) || 'no message';
    if (v.keyed) {
      body.key = v.keyed.key;
      body.params = Object.fromEntries(
        Object.entries(v.keyed.params).map(([name, value]) => [name, oneLine(value, 256) || '-']),
      );
    }
    if (proto && v.memory) {
      body.bgpState = bgpStateOf(proto.bgpState);
      body.bgpSince = new Date(v.memory.stateSince).toISOString();
    }
    verdicts.push(body);
  }
  for (const uuid of memory.sessions.keys())
    if (!input.sessions.some((s) => s.uuid === uuid && wantsUp(s))) memory.sessions.delete(uuid);
  memory.judgedBgp = judgedBgp;
  return verdicts;
}

/** Report: each verdict the controller does not have yet (status, lastError or BGP state changed); the ones it took. */
export async function report(input: PassInput, verdicts: readonly ModifyBody[]): Promise<ModifyBody[]> {
  const { deps, memory } = input;
  const current = new Map(input.sessions.map((s) => [s.uuid, s.status]));
  const keyOf = (body: ModifyBody) =>
    JSON.stringify([body.status, body.message, body.bgpState, body.bgpSince]);
  const due = verdicts.filter(
    (body) => body.status !== current.get(body.uuid) || memory.reported.get(body.uuid) !== keyOf(body),
  );
  // A few at once: a first pass over hundreds of sessions is not hundreds of round trips end to end.
  const taken = await mapLimit(due, REPORTS_IN_PARALLEL, async (body) => {
    try {
      await deps.reporter.modify(body);
      deps.log.info({ session: body.uuid, status: body.status }, 'status reported');
      return true;
    } catch (err) {
      deps.log.warn(
        { session: body.uuid, status: body.status, err: (err as Error).message },
        'status report failed; retried next pass',
      );
      return false;
    }
  });
  const reports = due.filter((_, i) => taken[i]);
  for (const body of reports) memory.reported.set(body.uuid, keyOf(body));
  for (const uuid of memory.reported.keys()) if (!current.has(uuid)) memory.reported.delete(uuid);
  return reports;
}

/** Retry: every session that failed this pass waits for its backoff; the others' failures are forgotten. */
export function retry(
  input: PassInput,
  failed: ReadonlyMap<string, SetupFailure>,
  waiting: ReadonlySet<string>,
): void {
  const { memory } = input;
  for (const [uuid, failure] of failed) {
    if (waiting.has(uuid)) continue;
    const s = input.sessions.find((x) => x.uuid === uuid);
    if (s)
      memory.retry.set(
        uuid,
        nextRetry(memory.retry.get(uuid), failure.message, sessionFingerprint(s), input.now),
      );
  }
  for (const uuid of memory.retry.keys()) if (!failed.has(uuid)) memory.retry.delete(uuid);
}

/** BIRD's protocols; when BIRD does not answer, none, and why (the judge says so). */
async function readProtocols(deps: ReconcileDeps): Promise<BirdProtocols> {
  try {
    return { byName: new Map((await deps.bird.protocols()).map((p) => [p.name, p])), error: undefined };
  } catch (err) {
    deps.log.debug({ err: (err as Error).message }, 'cannot read BIRD protocols');
    return { byName: new Map(), error: (err as Error).message };
  }
}

/** The latency the file on disk was rendered with, so a restarted agent renders the same bytes. */
function latencyFromFile(text: string | undefined): number | null {
  const m = text ? /import where \w+\((\d), /.exec(text) : null;
  if (!m) return null;
  const tier = Number(m[1]);
  // latencyCommunity maps an RTT back to the tier: the upper bound of each tier renders the same.
  const bounds = [2.7, 7.3, 20, 55, 148, 403, 1097, 2981];
  return tier >= 1 && tier <= 8 ? (bounds[tier - 1] ?? null) : null;
}
