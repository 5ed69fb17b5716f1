/**
 * The reconcile pass's decisions, pure: retry backoff, whom a BIRD refusal blames, and the status a
 * session gets from what BIRD and WireGuard show. No I/O and no clock of their own (`now` is an
 * argument), so test/agent/decisions.test.ts checks them as tables, without root, in milliseconds.
 */
import type { AgentSession } from '../../common/agent-api.ts';
import { interfaceName } from '../../common/naming.ts';
import { SessionStatus, type SessionStatusCode } from '../../common/status.ts';
import { englishText, type LastErrorKey } from '../../common/messages.ts';

// ---- retry backoff ----

export const RETRY_FIRST_MS = 5000;
export const RETRY_MAX_MS = 300_000;

/** A failed setup waiting for its next attempt. */
export interface RetryEntry {
  attempts: number;
  /** Epoch ms before which the session is left as it is on the node. */
  until: number;
  message: string;
  fingerprint: string;
}

/** 5 s, doubling per failed attempt, at most 5 minutes. */
export function retryDelayMs(attempts: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (Math.max(1, attempts) - 1));
}

/** The entry after one more failure. */
export function nextRetry(
  previous: RetryEntry | undefined,
  message: string,
  fingerprint: string,
  now: number,
): RetryEntry {
  const attempts = (previous?.attempts ?? 0) + 1;
  return { attempts, until: now + retryDelayMs(attempts), message, fingerprint };
}

/**
 * `wait`: leave the session as it is this pass; `retry`: try again now; `forget`: the session changed
 * (modify, restart), so its failures no longer count.
 */
export function retryDecision(
  entry: RetryEntry | undefined,
  fingerprint: string,
  now: number,
): 'wait' | 'retry' | 'forget' | 'none' {
  if (!entry) return 'none';
  if (entry.fingerprint !== fingerprint) return 'forget';
  return entry.until > now ? 'wait' : 'retry';
}

/** What a retry depends on: a change of the session (modify, restart) retries at once. */
export function sessionFingerprint(s: AgentSession): string {
  return JSON.stringify([
    s.endpoint,
    s.mtu,
    s.publicKey,
    s.linkLocal,
    s.restartGeneration,
    s.mpbgp,
    s.extendedNextHop,
  ]);
}

// ---- blame ----

/** BIRD's refusal as the applier saw it (bird/apply.ts ApplyFailure, reduced to what blame needs). */
export interface Refusal {
  message: string;
  /** Live paths BIRD named (file:line in its message). */
  blamed: readonly string[];
  /** BIRD did not answer at all (control socket): nothing was refused. */
  unreachable?: boolean;
}

/** A problem of the node, not of a session: the heartbeat's `ConfigApplied` condition (docs/agent.md). */
export interface NodeProblem {
  reason: 'LocalConfigRejected' | 'MainConfigRejected' | 'BirdRefused';
  message: string;
  file?: string;
  line?: number;
}

export interface Blame {
  /** Sessions whose own file BIRD refused: each of them, and only them, fails. */
  sessions: string[];
  node?: NodeProblem;
}

/**
 * Whom a refusal blames. A session's own file → that session only. A name defined twice (an operator's
 * `local.d` file defines a protocol named like a session: BIRD names the `local.d` file, which it reads
 * after the sessions' files) → the session being set up under that name, in `setupNames` (protocol
 * name → session), and only it: its new file never reaches the live tree (docs/agent.md). Any other
 * file (an operator's `local.d` file, the main config, an iBGP file) or no file at all → the node, and
 * no session; so is a name a running session already had (the operator's file is the change).
 */
export function blame(
  refusal: Refusal,
  fileOwner: ReadonlyMap<string, string>,
  mainPath: string,
  setupNames: ReadonlyMap<string, string> = new Map(),
): Blame {
  if (refusal.unreachable) return { sessions: [] };
  const sessions = [...new Set(refusal.blamed.map((p) => fileOwner.get(p)).filter((u): u is string => !!u))];
  if (sessions.length) return { sessions };
  // BIRD 2.0: `Symbol 'dn42_20001' already defined`; older: `Protocol dn42_20001 already exists`
  const twice = /(?:Symbol '(\w+)' already defined|Protocol (\w+) already exists)/.exec(refusal.message);
  const taken = twice && setupNames.get(twice[1] ?? twice[2] ?? '');
  if (taken) return { sessions: [taken] };
  const where = /(\/[^:\s]+):(\d+):(\d+)/.exec(refusal.message);
  const file = refusal.blamed.find((p) => !fileOwner.has(p)) ?? where?.[1];
  const reason: NodeProblem['reason'] = !file
    ? 'BirdRefused'
    : file === mainPath
      ? 'MainConfigRejected'
      : /\/local\.d\//.test(file)
        ? 'LocalConfigRejected'
        : 'BirdRefused';
  return {
    sessions: [],
    node: {
      reason,
      message: refusal.message,
      ...(file ? { file } : {}),
      ...(where?.[2] && where[1] === file ? { line: Number(where[2]) } : {}),
    },
  };
}

// ---- status verdicts ----

/**
 * How long a configured session may be without BGP Established before it is ERROR: BIRD retries a
 * connect every 120 s (its `connect retry time`), so a session that missed one attempt still comes up
 * within the grace; a peer that has not configured its side learns why within minutes (docs/agent.md).
 */
export const DEFAULT_GRACE_MS = 180_000;
/** A WireGuard handshake older than this (s) counts as none: WireGuard rekeys every 2 minutes under traffic. */
export const HANDSHAKE_FRESH_S = 180;

/**
 * The endpoint a pass gives a session's WireGuard peer, or undefined to leave WireGuard's own. WireGuard
 * moves a peer's endpoint to wherever its authenticated packets come from (roaming: a NAT that maps the
 * peer to another port, a line whose address changed before its DNS did); setting the configured one
 * back at every pass sent the router's packets where the peer no longer is until its next packet came. So
 * the configured endpoint goes in when WireGuard has none, when it differs from the one the agent gave
 * last (a modify, or the name's new address), and when the tunnel is quiet (no handshake within
 * HANDSHAKE_FRESH_S), as wireguard-tools' reresolve-dns does. After an agent restart (nothing given yet)
 * a live tunnel is left as it is (docs/agent.md, Endpoint resolution).
 */
export function endpointToSet(
  wanted: string | undefined,
  givenLast: string | undefined,
  peer: { endpoint: string | undefined; latestHandshake: number } | undefined,
  nowSeconds: number,
): string | undefined {
  if (wanted === undefined) return undefined;
  if (peer?.endpoint === undefined) return wanted;
  if (givenLast !== undefined && givenLast !== wanted) return wanted;
  const quiet = peer.latestHandshake === 0 || nowSeconds - peer.latestHandshake > HANDSHAKE_FRESH_S;
  return quiet ? wanted : undefined;
}

/** BIRD's BGP states as the API names them. */
export const BGP_STATES = ['Idle', 'Connect', 'Active', 'OpenSent', 'OpenConfirm', 'Established'] as const;
export type BgpState = (typeof BGP_STATES)[number];

export function bgpStateOf(text: string | undefined): BgpState | null {
  return BGP_STATES.find((s) => s === text) ?? null;
}

/** What the agent remembers of a session between passes (timing only; nothing about the node). */
export interface SessionMemory {
  /** When the session was first seen configured in BIRD (its protocol present). */
  configuredAt: number;
  /** BGP was Established at some point since (or the controller said ACTIVE when first seen). */
  wasEstablished: boolean;
  /** Since when BGP has not been Established (undefined while it is). */
  downSince: number | undefined;
  /** The last time BGP was seen Established. */
  lastEstablished: number | undefined;
  /** BIRD's BGP state last seen, and since when the agent has seen it (the API's bgpSince). */
  bgpState: BgpState | null;
  stateSince: number;
  /** Unix seconds of the last WireGuard handshake seen (0: none): the fault watch's deadline. */
  lastHandshake?: number;
  /** When a pass last made the session's deleted tunnel anew, until BGP is Established again. */
  tunnelRecreatedAt?: number;
}

export interface SessionFacts {
  session: Pick<AgentSession, 'status' | 'listenPort' | 'asn'>;
  /** This router's side, named in the hint on BGP settings. */
  ours: { asn: number; linkLocal: string };
  /** This pass's setup failure (WireGuard, render or BIRD refused this session's file). */
  failure: string | undefined;
  /** BIRD's protocol for the session; undefined when BIRD could not be read or does not have it yet. */
  protocol: { bgpState: string | undefined; lastError: string | undefined } | undefined;
  /** Unix seconds of the last WireGuard handshake; 0 when none. */
  lastHandshake: number;
  /** Why BIRD could not be asked this pass (its control socket refused or did not answer). */
  birdDown?: string | undefined;
  /** The session's tunnel was gone and this pass made it anew (deleted behind the agent's back). */
  tunnelRecreated?: boolean;
  memory: SessionMemory | undefined;
  now: number;
}

export interface Verdict {
  /** The status to report; undefined: no verdict this pass (keep whatever the controller has). */
  status: SessionStatusCode | undefined;
  /** lastError for ERROR and SETUP_FAILED; undefined otherwise (which clears it). */
  message: string | undefined;
  /** The catalogue key of `message` (common/messages.ts), for the portal in the peer's language. */
  keyed?: LastErrorKeyed;
  memory: SessionMemory | undefined;
}

/** A lastError's catalogue key and its parameters, as the report carries them (common/agent-api.ts). */
export interface LastErrorKeyed {
  key: LastErrorKey;
  params: Record<string, string>;
}

const RUNNING: readonly SessionStatusCode[] = [SessionStatus.ACTIVE, SessionStatus.ERROR];

/**
 * The status rules (docs/agent.md, "What a session's status means"): ACTIVE only while BGP is
 * Established over a live tunnel (a handshake within WireGuard's reject time); a running session whose
 * BGP went down, whose tunnel went quiet or whose BIRD does not answer is ERROR at once, with a message
 * that says where to look; a new session not Established for longer than the grace → ERROR; within
 * the grace it keeps its status (a retried setup that worked waits as QUEUED_FOR_SETUP, its old error
 * gone).
 */
export function judge(f: SessionFacts, graceMs = DEFAULT_GRACE_MS): Verdict {
  const { session: s, now } = f;
  const running = RUNNING.includes(s.status);
  if (f.failure !== undefined) {
    const status = running ? SessionStatus.ERROR : SessionStatus.SETUP_FAILED;
    return { status, message: f.failure, memory: undefined };
  }
  if (f.birdDown !== undefined) {
    // Nothing of BGP can be known; a running session does not carry traffic without BIRD.
    const m = f.memory && { ...f.memory, downSince: f.memory.downSince ?? now };
    const keyed: LastErrorKeyed = { key: 'lastError.birdDown', params: { reason: f.birdDown } };
    return running
      ? { status: SessionStatus.ERROR, message: englishText(keyed.key, keyed.params), keyed, memory: m }
      : { status: undefined, message: undefined, memory: m };
  }
  if (!f.protocol) return { status: undefined, message: undefined, memory: f.memory };
  const m: SessionMemory = f.memory
    ? { ...f.memory }
    : {
        configuredAt: now,
        wasEstablished: s.status === SessionStatus.ACTIVE,
        downSince: undefined,
        lastEstablished: undefined,
        bgpState: null,
        stateSince: now,
      };
  m.lastHandshake = f.lastHandshake;
  if (f.tunnelRecreated) m.tunnelRecreatedAt = now;
  const state = bgpStateOf(f.protocol.bgpState);
  if (state !== m.bgpState || !f.memory) {
    m.bgpState = state;
    m.stateSince = now;
  }
  if (state === 'Established' && !handshakeStale(f)) {
    m.wasEstablished = true;
    m.downSince = undefined;
    m.tunnelRecreatedAt = undefined;
    m.lastEstablished = now;
    return { status: SessionStatus.ACTIVE, message: undefined, memory: m };
  }
  m.downSince ??= m.wasEstablished ? now : m.configuredAt;
  // Lost after it was up: said at once (the peer's BIRD or tunnel went down); a new session has the grace.
  if (!m.wasEstablished && now - m.downSince < graceMs) {
    // Within the grace: a running session stays what it is; a setup that worked (after a failure, or a
    // first one) waits as QUEUED_FOR_SETUP, reported with BIRD's state so the peer reads that the router
    // waits for its side (docs/agent.md).
    const waits = s.status === SessionStatus.SETUP_FAILED || s.status === SessionStatus.QUEUED_FOR_SETUP;
    const status = waits ? SessionStatus.QUEUED_FOR_SETUP : undefined;
    return { status, message: undefined, memory: m };
  }
  return { status: SessionStatus.ERROR, ...whereToLook(f, state, m), memory: m };
}

/**
 * No handshake for longer than WireGuard's reject time: no packet passes the tunnel, whatever BGP still
 * says until its hold timer runs out.
 */
function handshakeStale(f: SessionFacts): boolean {
  return f.lastHandshake > 0 && f.now / 1000 - f.lastHandshake > HANDSHAKE_FRESH_S;
}

/** The lastError of a session configured on the router whose BGP is not Established. */
function whereToLook(
  f: SessionFacts,
  state: BgpState | null,
  m: SessionMemory,
): { message: string; keyed: LastErrorKeyed } {
  const { session: s, now } = f;
  const bgp =
    state === 'Established'
      ? 'BGP still Established until its hold timer runs out'
      : `BGP ${state ?? 'not running'}${f.protocol?.lastError ? ` (BIRD: ${f.protocol.lastError})` : ''}`;
  const handshakeAge = f.lastHandshake > 0 ? now / 1000 - f.lastHandshake : Number.POSITIVE_INFINITY;
  const lost =
    m.wasEstablished && m.lastEstablished !== undefined
      ? `BGP was Established until ${new Date(m.lastEstablished).toISOString()}, then lost; `
      : m.wasEstablished
        ? 'BGP was Established, then lost; '
        : '';
  const port = String(s.listenPort);
  if (m.tunnelRecreatedAt !== undefined) {
    const keyed: LastErrorKeyed = {
      key: 'lastError.tunnelRecreated',
      params: { interface: interfaceName(s.listenPort), port },
    };
    const message = `${lost}the router's WireGuard tunnel ${interfaceName(s.listenPort)} was gone and was made anew at ${new Date(m.tunnelRecreatedAt).toISOString()}, ${bgp}: it comes back by itself; if it stays so, check the peer's WireGuard (its endpoint and public key for this router, our endpoint port ${s.listenPort})`;
    return { message, keyed };
  }
  if (handshakeAge > HANDSHAKE_FRESH_S) {
    const handshake =
      f.lastHandshake > 0
        ? `no WireGuard handshake since ${new Date(f.lastHandshake * 1000).toISOString()}`
        : 'no WireGuard handshake with the peer yet';
    return {
      message: `${lost}${handshake}, ${bgp}: check the peer's WireGuard (its endpoint and public key for this router, our endpoint port ${s.listenPort}, the tunnel up on its side)`,
      keyed: { key: 'lastError.noHandshake', params: { port } },
    };
  }
  // No figures that change every pass (the handshake's age): the message is reported when it changes.
  return {
    message: `${lost}WireGuard handshakes (the tunnel is up) but ${bgp}: check the BGP settings on the peer's side (neighbor ${f.ours.linkLocal} as ${f.ours.asn} on its tunnel interface, local as ${s.asn}, multiprotocol and extended next hop as the session says)`,
    keyed: {
      key: 'lastError.bgpDown',
      params: { neighbor: f.ours.linkLocal, asn: String(f.ours.asn), peerAsn: String(s.asn) },
    },
  };
}
