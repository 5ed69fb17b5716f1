/**
 * The steps of one reconcile pass, run in this order by NodeReconciler (node-reconciler.ts), each a
 * named function over the pass's context: render → apply → tunnels → reconnect → judge → report →
 * retry. The steps do the I/O; what they decide comes from decisions.ts.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { mapLimit } from '../../common/concurrency.ts';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../common/agent-api.ts';
import { SessionStatus } from '../../common/status.ts';
import { oneLine } from '../../common/text.ts';
import { readTextIfExists, readTextsIfExist } from '../../common/read-file.ts';
import type { ApplyResult, BirdApplier, DesiredTree, ManagedDir } from '../bird/apply.ts';
import type { BirdControl, ProtocolInfo } from '../bird/control.ts';
import { renderIbgpConfigs } from '../bird/ibgp.ts';
import { renderMainConfig } from '../bird/main-config.ts';
import { sessionIpv4ProtocolName, sessionProtocolName } from '../bird/names.ts';
import { peerFileName, peerView, renderPeerConfig } from '../bird/peer-config.ts';
import type { AgentConfig } from '../config.ts';
import { resolveEndpoint, type Resolve } from '../wireguard/endpoint.ts';
import type { WgInterfaceState } from '../wireguard/read.ts';
import type { WgInterfaceSpec, WireGuard } from '../wireguard/types.ts';
import {
  bgpStateOf,
  blame,
  judge as judgeSession,
  nextRetry,
  retryDecision,
  sessionFingerprint,
  type NodeProblem,
  type RetryEntry,
  type SessionMemory,
} from './decisions.ts';
import { sessionInterfaceSpec, wantsUp } from './desired.ts';

/** Extra desired state from the mesh code: its interfaces and BIRD include dirs, applied in the same pass. */
export interface ReconcileHooks {
  extraInterfaces?: () => WgInterfaceSpec[] | Promise<WgInterfaceSpec[]>;
  extraDirs?: () => ManagedDir[] | Promise<ManagedDir[]>;
  meshInterfaces?: () => string[];
}

export interface ReconcileDeps {
  config: AgentConfig;
  bird: Pick<BirdControl, 'protocols' | 'restartProtocol'>;
  applier: Pick<BirdApplier, 'apply' | 'mainPath'>;
  wireguard: WireGuard;
  /** Sends a status report; resolves when the controller took it. */
  report: (body: ModifyBody) => Promise<void>;
  log: Logger;
  hooks?: ReconcileHooks;
  /** Custom eBGP template text (routing.ebgpConfTemplateFile), read by the caller. */
  template?: () => Promise<string | undefined>;
  /** How long a configured session may be without BGP Established before it is ERROR. */
  graceMs?: number;
  /** The clock (epoch ms). */
  now?: () => number;
  /** Resolves session endpoints given by name (endpoint.ts; the system's resolver by default). */
  resolve?: Resolve;
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

export interface PassContext {
  deps: ReconcileDeps;
  memory: ReconcileMemory;
  now: number;
  sessions: readonly AgentSession[];
  up: AgentSession[];
  policy: BirdConfigResponse;
  /** Failed setups waiting for their retry: left exactly as they are on the node. */
  waiting: Set<string>;
  links: Map<string, WgInterfaceState>;
  /** Sessions whose tunnel was made anew under a BGP session BIRD may already run. */
  recreated: AgentSession[];
  peerFiles: Map<string, string>;
  /** Live path of a session's BIRD file → its uuid. */
  fileOwner: Map<string, string>;
  tree: DesiredTree | undefined;
  protocols: Map<string, ProtocolInfo>;
  /** Why BIRD's protocols could not be read, the last time this pass asked. */
  birdError: string | undefined;
  /** The protocols BIRD ran before this pass's configure. */
  ranBefore: Set<string>;
  applied: ApplyResult | undefined;
  verdicts: ModifyBody[];
  result: PassResult;
}

export interface Step {
  name: string;
  run(ctx: PassContext): Promise<void>;
}

const SESSION_PREFIX = 'wg_';
/**
 * Tunnels set up (or removed) at once. A tunnel's setup is mostly waiting (wireguard-go starting, ip and
 * wg commands), so a bound of 8 keeps two cores busy without a burst of hundreds of processes.
 */
export const TUNNELS_IN_PARALLEL = 8;
/** Status reports in flight at once (the controller takes each as a write). */
export const REPORTS_IN_PARALLEL = 4;

/**
 * Tunnels: every wanted session link made to match its spec, the mesh's too; unwanted `wg_*` links
 * removed. After apply: BIRD already runs the session, waiting for its neighbor, when the link comes up,
 * so the peer's first connection (its SYN held by its WireGuard until the router's keepalive completes
 * the handshake) is accepted at once instead of waiting for BIRD's connect delay.
 */
async function tunnels(ctx: PassContext): Promise<void> {
  const { deps, result } = ctx;
  const extra = (await deps.hooks?.extraInterfaces?.()) ?? [];
  const wanted = new Set([...ctx.up.map((s) => s.interface), ...extra.map((e) => e.name)]);
  ctx.memory.wantedLinks = wanted;
  ctx.links = await deps.wireguard.readAll([SESSION_PREFIX]);
  // Each session's tunnel on its own: a failure is that session's only.
  const ensured = await mapLimit(
    ctx.up.filter((s) => !ctx.waiting.has(s.uuid)),
    TUNNELS_IN_PARALLEL,
    async (s) => {
      try {
        // the address WireGuard gets, judged as the controller judges endpoints (docs/agent.md)
        const endpoint =
          s.endpoint &&
          (await resolveEndpoint(s.endpoint, ctx.policy.allowPrivateEndpoints ?? false, deps.resolve));
        const spec = sessionInterfaceSpec({ ...s, endpoint }, deps.config);
        return { s, r: await deps.wireguard.ensure(spec, ctx.links.get(s.interface) ?? null) };
      } catch (err) {
        return { s, err: err as Error };
      }
    },
  );
  for (const { s, r, err } of ensured) {
    if (err) result.failed.set(s.uuid, err.message);
    if (!r) continue;
    if (r.created) ctx.recreated.push(s);
    if (r.changes.length) {
      result.interfacesChanged++;
      deps.log.info({ session: s.uuid, interface: s.interface, changes: r.changes }, 'tunnel changed');
    }
  }
  for (const spec of extra) {
    try {
      await deps.wireguard.ensure(spec);
    } catch (err) {
      deps.log.warn({ interface: spec.name, err: (err as Error).message }, 'mesh tunnel failed');
    }
  }
  const unwanted = [...ctx.links.keys()].filter((name) => !wanted.has(name));
  await mapLimit(unwanted, TUNNELS_IN_PARALLEL, async (name) => {
    await deps.wireguard.remove(name);
    result.interfacesRemoved++;
    deps.log.info({ interface: name }, 'removed tunnel no session wants');
  });
  if (result.interfacesChanged || result.interfacesRemoved)
    ctx.links = await deps.wireguard.readAll([SESSION_PREFIX]);
}

/** Render: one BIRD file per session (a failed or waiting one keeps its file on disk), the main config, iBGP. */
async function render(ctx: PassContext): Promise<void> {
  const { deps, result, policy } = ctx;
  const { config } = deps;
  for (const s of ctx.up) {
    const decision = retryDecision(ctx.memory.retry.get(s.uuid), sessionFingerprint(s), ctx.now);
    if (decision === 'forget') ctx.memory.retry.delete(s.uuid);
    if (decision === 'wait') {
      ctx.waiting.add(s.uuid);
      result.failed.set(s.uuid, ctx.memory.retry.get(s.uuid)!.message);
    }
  }
  const template = await deps.template?.();
  const peerFilesOnDisk = readTextsIfExist(config.routing.peerConfDir, ctx.up.map(peerFileName));
  for (const s of ctx.up) {
    const name = peerFileName(s);
    const path = join(config.routing.peerConfDir, name);
    ctx.fileOwner.set(path, s.uuid);
    const onDisk = peerFilesOnDisk.get(name);
    if (ctx.waiting.has(s.uuid) || result.failed.has(s.uuid)) {
      if (onDisk !== undefined) ctx.peerFiles.set(name, onDisk);
      continue;
    }
    try {
      const rtt = ctx.memory.rtt.has(s.uuid) ? ctx.memory.rtt.get(s.uuid) : latencyFromFile(onDisk);
      ctx.peerFiles.set(name, renderPeerConfig(peerView(s, policy, rtt, config.tunnel.dn42Ipv4), template));
    } catch (err) {
      if (onDisk !== undefined) ctx.peerFiles.set(name, onDisk);
      const running = s.status === SessionStatus.ACTIVE || s.status === SessionStatus.ERROR;
      // A running session keeps the file BIRD runs; only setups that need a new file fail.
      if (running && onDisk !== undefined)
        deps.log.warn(
          { session: s.uuid, err: (err as Error).message },
          'cannot render; keeping the running file',
        );
      else result.failed.set(s.uuid, (err as Error).message);
    }
  }
  const extraDirs = (await deps.hooks?.extraDirs?.()) ?? [];
  const meshInterfaces = deps.hooks?.meshInterfaces?.();
  ctx.tree = {
    main: (dirs: Record<string, string>) =>
      renderMainConfig(
        policy,
        {
          peerConfDir: dirs.peerConfDir ?? config.routing.peerConfDir,
          ibgpConfDir: dirs.ibgpConfDir ?? config.routing.ibgpConfDir,
          ...(dirs.meshConfDir ? { meshConfDir: dirs.meshConfDir } : {}),
          controlSocket: config.routing.controlSocket,
        },
        meshInterfaces ? { meshInterfaces } : {},
      ),
    dirs: [
      {
        key: 'peerConfDir',
        dir: config.routing.peerConfDir,
        files: ctx.peerFiles,
        onDisk: peerFilesOnDisk,
      },
      { key: 'ibgpConfDir', dir: config.routing.ibgpConfDir, files: renderIbgpConfigs(policy) },
      ...extraDirs,
    ],
  };
}

/**
 * Apply: the tree checked and swapped in, one configure. A refusal naming a session's file fails that
 * session and the rest goes ahead without its change; a refusal no session caused is the node's.
 */
async function apply(ctx: PassContext): Promise<void> {
  const { deps, result, memory } = ctx;
  const tree = ctx.tree!;
  // BIRD must run what the files say: a protocol set that differs (BIRD restarted on other files), or a
  // node problem that may have been mended meanwhile, forces one configure even when the files match.
  await readProtocols(ctx);
  ctx.ranBefore = new Set(ctx.protocols.keys());
  const wantProtocols = [...ctx.peerFiles.keys()].map((f) => f.replace(/\.conf$/, '')).sort();
  const haveProtocols = [...ctx.protocols.keys()].filter((n) => /^dn42_\d+$/.test(n)).sort();
  const forceConfigure =
    (ctx.protocols.size > 0 && wantProtocols.join() !== haveProtocols.join()) || memory.node !== undefined;

  // Names of sessions set up now (no file on disk yet): one taken by an operator's local.d file fails
  // that setup, not the node.
  const onDisk = tree.dirs.find((d) => d.key === 'peerConfDir')?.onDisk;
  const setupNames = new Map(
    ctx.up
      .filter((s) => onDisk?.get(peerFileName(s)) === undefined)
      .flatMap((s) =>
        [sessionProtocolName(s.listenPort), sessionIpv4ProtocolName(s.listenPort)].map((n) => [n, s.uuid]),
      ),
  );
  const blameOf = (failure: ApplyResult['failure']) =>
    failure && blame(failure, ctx.fileOwner, deps.applier.mainPath, setupNames);
  let applied = await deps.applier.apply(tree, { forceConfigure });
  let verdict = blameOf(applied.failure);
  if (applied.failure?.stage === 'check' && verdict?.sessions.length) {
    // The check named a session's file: that session fails, the others go ahead without its change.
    for (const uuid of verdict.sessions) {
      result.failed.set(uuid, applied.failure.message);
      const path = [...ctx.fileOwner].find(([, u]) => u === uuid)![0];
      const name = path.slice(path.lastIndexOf('/') + 1);
      const onDisk = await readTextIfExists(path);
      if (onDisk !== undefined) ctx.peerFiles.set(name, onDisk);
      else ctx.peerFiles.delete(name);
    }
    applied = await deps.applier.apply(tree, { forceConfigure });
    verdict = blameOf(applied.failure);
  }
  ctx.applied = applied;
  result.writes = applied.writes;
  result.configured = applied.configured;
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
    for (const uuid of verdict.sessions) result.failed.set(uuid, failure.message);
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
  result.node = memory.node;
  result.birdUnreachable = memory.birdUnreachable;
}

/**
 * Reconnect: a tunnel made anew under a BGP session BIRD already ran before this pass is restarted now,
 * not after BGP's hold time; then BIRD's protocols are read for the judge.
 */
async function reconnect(ctx: PassContext): Promise<void> {
  const { deps, result } = ctx;
  for (const s of ctx.recreated) {
    if (result.failed.has(s.uuid)) continue;
    for (const name of [sessionProtocolName(s.listenPort), sessionIpv4ProtocolName(s.listenPort)]) {
      if (!ctx.ranBefore.has(name)) continue;
      await deps.bird
        .restartProtocol(name)
        .catch((err: Error) => deps.log.warn({ protocol: name, err: err.message }, 'BGP restart failed'));
    }
  }
  if (ctx.applied?.configured || ctx.recreated.length) await readProtocols(ctx);
}

/** Judge: each session's status from this pass's failures, BIRD's BGP state and WireGuard's handshake. */
async function judge(ctx: PassContext): Promise<void> {
  const { deps, memory, result } = ctx;
  const birdFailed = ctx.applied?.failure !== undefined;
  const ours = { asn: ctx.policy.dn42Asn, linkLocal: deps.config.tunnel.dn42Ipv6LinkLocal };
  const judgedBgp = new Map<string, string>();
  for (const s of ctx.sessions) {
    const base = { uuid: s.uuid, interface: s.interface };
    if (s.status === SessionStatus.QUEUED_FOR_DELETE) {
      // Torn down when neither link nor file remains and BIRD accepted the config without it (a removed
      // protocol may still be listed, down, while BIRD flushes its routes).
      const proto = ctx.protocols.get(sessionProtocolName(s.listenPort));
      const file = await readTextIfExists(join(deps.config.routing.peerConfDir, peerFileName(s)));
      const gone = !ctx.links.has(s.interface) && file === undefined && (!proto || proto.state !== 'up');
      if (gone && !birdFailed) ctx.verdicts.push({ ...base, status: SessionStatus.DISABLED });
      continue;
    }
    if (!wantsUp(s)) continue;
    const proto = ctx.protocols.get(sessionProtocolName(s.listenPort));
    if (proto) judgedBgp.set(proto.name, proto.bgpState ?? '');
    const peer = ctx.links.get(s.interface)?.wg?.peers.find((p) => p.publicKey === s.publicKey);
    const v = judgeSession(
      {
        session: s,
        ours,
        failure: result.failed.get(s.uuid),
        protocol: proto ? { bgpState: proto.bgpState, lastError: proto.lastError } : undefined,
        lastHandshake: peer?.latestHandshake ?? 0,
        birdDown: ctx.birdError,
        tunnelRecreated: ctx.recreated.includes(s),
        memory: memory.sessions.get(s.uuid),
        now: ctx.now,
      },
      deps.graceMs,
    );
    if (v.memory) memory.sessions.set(s.uuid, v.memory);
    else memory.sessions.delete(s.uuid);
    if (v.status === undefined) continue;
    const body: ModifyBody = { ...base, status: v.status };
    // one printable line: the controller refuses control characters (BIRD's output has newlines)
    if (v.message !== undefined) body.message = oneLine(v.message, 4096) || 'no message';
    if (proto && v.memory) {
      body.bgpState = bgpStateOf(proto.bgpState);
      body.bgpSince = new Date(v.memory.stateSince).toISOString();
    }
    ctx.verdicts.push(body);
  }
  for (const uuid of memory.sessions.keys())
    if (!ctx.sessions.some((s) => s.uuid === uuid && wantsUp(s))) memory.sessions.delete(uuid);
  memory.judgedBgp = judgedBgp;
}

/** Report: each verdict the controller does not have yet (status, lastError or BGP state changed). */
async function report(ctx: PassContext): Promise<void> {
  const { deps, memory } = ctx;
  const current = new Map(ctx.sessions.map((s) => [s.uuid, s.status]));
  const keyOf = (body: ModifyBody) =>
    JSON.stringify([body.status, body.message, body.bgpState, body.bgpSince]);
  const due = ctx.verdicts.filter(
    (body) => body.status !== current.get(body.uuid) || memory.reported.get(body.uuid) !== keyOf(body),
  );
  // A few at once: a first pass over hundreds of sessions is not hundreds of round trips end to end.
  const taken = await mapLimit(due, REPORTS_IN_PARALLEL, async (body) => {
    try {
      await deps.report(body);
      return true;
    } catch (err) {
      deps.log.warn(
        { session: body.uuid, status: body.status, err: (err as Error).message },
        'status report failed; retried next pass',
      );
      return false;
    }
  });
  due.forEach((body, i) => {
    if (!taken[i]) return;
    memory.reported.set(body.uuid, keyOf(body));
    ctx.result.reports.push(body);
  });
  for (const uuid of memory.reported.keys()) if (!current.has(uuid)) memory.reported.delete(uuid);
}

/** Retry: every session that failed this pass waits for its backoff; the others' failures are forgotten. */
async function retry(ctx: PassContext): Promise<void> {
  const { memory, result } = ctx;
  for (const [uuid, message] of result.failed) {
    if (ctx.waiting.has(uuid)) continue;
    const s = ctx.sessions.find((x) => x.uuid === uuid);
    if (s) memory.retry.set(uuid, nextRetry(memory.retry.get(uuid), message, sessionFingerprint(s), ctx.now));
  }
  for (const uuid of memory.retry.keys()) if (!result.failed.has(uuid)) memory.retry.delete(uuid);
}

/** The pass, in order. */
export const STEPS: readonly Step[] = [
  { name: 'render', run: render },
  { name: 'apply', run: apply },
  { name: 'tunnels', run: tunnels },
  { name: 'reconnect', run: reconnect },
  { name: 'judge', run: judge },
  { name: 'report', run: report },
  { name: 'retry', run: retry },
];

/** BIRD's protocols into the pass's context; when BIRD does not answer, none, and why (the judge says so). */
async function readProtocols(ctx: PassContext): Promise<void> {
  try {
    ctx.protocols = new Map((await ctx.deps.bird.protocols()).map((p) => [p.name, p]));
    ctx.birdError = undefined;
  } catch (err) {
    ctx.deps.log.debug({ err: (err as Error).message }, 'cannot read BIRD protocols');
    ctx.protocols = new Map();
    ctx.birdError = (err as Error).message;
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
