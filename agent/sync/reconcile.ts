/**
 * One level-triggered reconcile pass (DESIGN.md section 7): the desired state (sessions and routing
 * policy from the controller) against the actual state read from the system on every pass (links,
 * WireGuard peers, rendered files, BIRD protocols). Only what differs is changed; one BIRD configure at
 * most; a status is reported only when it differs from the controller's. In-memory state is limited to
 * timing (retry backoff, grace periods) and measurements (RTT); nothing about the node is trusted to it.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentSession, BirdConfigResponse, ModifyBody } from '../../common/agent-api.ts';
import { SessionStatus, type SessionStatusCode } from '../../common/status.ts';
import { oneLine } from '../../common/text.ts';
import { readTextIfExists } from '../../common/read-file.ts';
import type { BirdApplier, ManagedDir } from '../bird/apply.ts';
import type { BirdControl, ProtocolInfo } from '../bird/control.ts';
import { renderIbgpConfigs } from '../bird/ibgp.ts';
import { renderMainConfig } from '../bird/main-config.ts';
import { sessionIpv4ProtocolName, sessionProtocolName } from '../bird/names.ts';
import { peerFileName, peerView, renderPeerConfig } from '../bird/peer-config.ts';
import type { AgentConfig } from '../config.ts';
import {
  ensureInterface,
  readAllInterfaces,
  removeInterface,
  type WgInterfaceState,
} from '../wireguard/interface.ts';
import type { WgInterfaceSpec } from '../wireguard/types.ts';
import { sessionInterfaceSpec, wantsUp } from './desired.ts';

/** Extra desired state from the mesh code: its interfaces and BIRD include dirs, applied in the same pass. */
export interface ReconcileHooks {
  extraInterfaces?: () => WgInterfaceSpec[] | Promise<WgInterfaceSpec[]>;
  extraDirs?: () => ManagedDir[] | Promise<ManagedDir[]>;
  meshInterfaces?: () => string[];
}

export interface ReconcileDeps {
  config: AgentConfig;
  bird: BirdControl;
  applier: BirdApplier;
  /** Sends a status report; resolves when the controller took it. */
  report: (body: ModifyBody) => Promise<void>;
  log: Logger;
  hooks?: ReconcileHooks;
  /** Custom eBGP template text (routing.ebgpConfTemplateFile), read by the caller. */
  template?: () => Promise<string | undefined>;
  /** A running session is not judged before this long after its setup (default 5 minutes). */
  errorGraceMs?: number;
  /** BGP not Established and no WireGuard handshake for this long → ERROR (default 180 s). */
  handshakeStaleSeconds?: number;
}

export interface PassResult {
  interfacesChanged: number;
  interfacesRemoved: number;
  writes: number;
  configured: boolean;
  reports: ModifyBody[];
  failed: Map<string, string>;
}

const SESSION_PREFIX = 'wg_';
const HANDSHAKE_STALE_S = 180;

export class Reconciler {
  private readonly deps: ReconcileDeps;
  /** uuid → retry backoff of a failed setup. */
  private readonly retry = new Map<
    string,
    { attempts: number; until: number; message: string; fingerprint: string }
  >();
  /** uuid → time the setup was first seen succeeding (grace before ERROR). */
  private readonly upSince = new Map<string, number>();
  /** uuid → last measured RTT in ms (metrics loop), for the latency community. */
  readonly rtt = new Map<string, number | null>();

  constructor(deps: ReconcileDeps) {
    this.deps = deps;
  }

  async pass(sessions: readonly AgentSession[], policy: BirdConfigResponse): Promise<PassResult> {
    const { config, log } = this.deps;
    const now = Date.now();
    const failed = new Map<string, string>();
    const up = sessions.filter(wantsUp);
    const result: PassResult = {
      interfacesChanged: 0,
      interfacesRemoved: 0,
      writes: 0,
      configured: false,
      reports: [],
      failed,
    };

    // Sessions whose failed setup waits for its retry are left exactly as they are on the node.
    const waiting = new Set<string>();
    for (const s of up) {
      const r = this.retry.get(s.uuid);
      if (r && r.fingerprint !== fingerprint(s)) this.retry.delete(s.uuid);
      else if (r && r.until > now) {
        waiting.add(s.uuid);
        failed.set(s.uuid, r.message);
      }
    }

    // ---- WireGuard ----
    const extra = (await this.deps.hooks?.extraInterfaces?.()) ?? [];
    const recreated: AgentSession[] = [];
    const wantedLinks = new Set([...up.map((s) => s.interface), ...extra.map((e) => e.name)]);
    const links = await readAllInterfaces([SESSION_PREFIX]);
    for (const s of up) {
      if (waiting.has(s.uuid)) continue;
      try {
        const r = await ensureInterface(sessionInterfaceSpec(s, config), links.get(s.interface) ?? null);
        if (r.created) recreated.push(s);
        if (r.changes.length) {
          result.interfacesChanged++;
          log.info({ session: s.uuid, interface: s.interface, changes: r.changes }, 'tunnel changed');
        }
      } catch (err) {
        failed.set(s.uuid, (err as Error).message);
      }
    }
    for (const spec of extra) {
      try {
        await ensureInterface(spec);
      } catch (err) {
        log.warn({ interface: spec.name, err: (err as Error).message }, 'mesh tunnel failed');
      }
    }
    for (const name of links.keys()) {
      if (wantedLinks.has(name)) continue;
      await removeInterface(name);
      result.interfacesRemoved++;
      log.info({ interface: name }, 'removed tunnel no session wants');
    }

    // ---- BIRD files ----
    const template = await this.deps.template?.();
    const peerFiles = new Map<string, string>();
    const fileOwner = new Map<string, string>();
    for (const s of up) {
      const name = peerFileName(s);
      const path = join(config.routing.peerConfDir, name);
      fileOwner.set(path, s.uuid);
      const onDisk = await readTextIfExists(path);
      if (waiting.has(s.uuid) || failed.has(s.uuid)) {
        if (onDisk !== undefined) peerFiles.set(name, onDisk);
        continue;
      }
      try {
        const rtt = this.rtt.has(s.uuid) ? this.rtt.get(s.uuid) : latencyFromFile(onDisk);
        peerFiles.set(name, renderPeerConfig(peerView(s, policy, rtt, config.tunnel.dn42Ipv4), template));
      } catch (err) {
        if (onDisk !== undefined) peerFiles.set(name, onDisk);
        const running = s.status === SessionStatus.ACTIVE || s.status === SessionStatus.ERROR;
        // A running session keeps the file BIRD runs; only setups that need a new file fail.
        if (running && onDisk !== undefined) {
          log.warn(
            { session: s.uuid, err: (err as Error).message },
            'cannot render; keeping the running file',
          );
        } else failed.set(s.uuid, (err as Error).message);
      }
    }
    const extraDirs = (await this.deps.hooks?.extraDirs?.()) ?? [];
    const meshInterfaces = this.deps.hooks?.meshInterfaces?.();
    const tree = {
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
        { key: 'peerConfDir', dir: config.routing.peerConfDir, files: peerFiles },
        { key: 'ibgpConfDir', dir: config.routing.ibgpConfDir, files: renderIbgpConfigs(policy) },
        ...extraDirs,
      ],
    };

    // BIRD must run what the files say: a protocol set that differs (BIRD restarted on other files)
    // forces one configure even when the files match; the applier's marker covers an agent that died
    // between its swap and its configure.
    let protocols = await this.protocols();
    const wantProtocols = [...peerFiles.keys()].map((f) => f.replace(/\.conf$/, '')).sort();
    const haveProtocols = [...protocols.keys()].filter((n) => /^dn42_\d+$/.test(n)).sort();
    const forceConfigure = protocols.size > 0 && wantProtocols.join() !== haveProtocols.join();

    let applied = await this.deps.applier.apply(tree, { forceConfigure });
    if (applied.failure?.stage === 'check' && applied.failure.blamed.some((p) => fileOwner.has(p))) {
      // The check named a session's file: that session fails, the others go ahead without its change.
      for (const path of applied.failure.blamed) {
        const uuid = fileOwner.get(path);
        if (!uuid) continue;
        failed.set(uuid, applied.failure.message);
        const name = path.slice(path.lastIndexOf('/') + 1);
        const onDisk = await readTextIfExists(path);
        if (onDisk !== undefined) peerFiles.set(name, onDisk);
        else peerFiles.delete(name);
      }
      applied = await this.deps.applier.apply(tree, { forceConfigure });
    }
    result.writes = applied.writes;
    result.configured = applied.configured;
    if (applied.failure) {
      const f = applied.failure;
      const blamedOwners = f.blamed.map((p) => fileOwner.get(p)).filter((u): u is string => !!u);
      const owners = blamedOwners.length
        ? blamedOwners
        : f.changed.map((p) => fileOwner.get(p)).filter((u): u is string => !!u);
      for (const uuid of owners) failed.set(uuid, f.message);
      log.error({ stage: f.stage, message: f.message, sessions: owners }, 'BIRD refused the configuration');
    }
    // A tunnel made anew under a BGP session BIRD already runs: reconnect now, not after BGP's retry time.
    for (const s of recreated) {
      if (failed.has(s.uuid)) continue;
      for (const name of [sessionProtocolName(s.listenPort), sessionIpv4ProtocolName(s.listenPort)]) {
        if (!protocols.has(name)) continue;
        await this.deps.bird
          .restartProtocol(name)
          .catch((err: Error) => log.warn({ protocol: name, err: err.message }, 'BGP restart failed'));
      }
    }
    if (applied.configured || recreated.length) protocols = await this.protocols();

    // ---- statuses ----
    const linksNow =
      result.interfacesChanged || result.interfacesRemoved
        ? await readAllInterfaces([SESSION_PREFIX])
        : links;
    for (const s of sessions) {
      const status = await this.statusOf(s, failed, protocols, applied.failure !== undefined, linksNow);
      if (status === undefined || status === s.status) continue;
      const body: ModifyBody = { uuid: s.uuid, status, interface: s.interface };
      const message = failed.get(s.uuid);
      if (message && (status === SessionStatus.SETUP_FAILED || status === SessionStatus.ERROR)) {
        // one printable line: the controller refuses control characters (BIRD's output has newlines)
        body.message = oneLine(message, 4096) || 'no message';
      }
      try {
        await this.deps.report(body);
        result.reports.push(body);
      } catch (err) {
        log.warn(
          { session: s.uuid, status, err: (err as Error).message },
          'status report failed; retried next pass',
        );
      }
    }
    for (const [uuid, message] of failed) {
      if (waiting.has(uuid)) continue;
      const s = sessions.find((x) => x.uuid === uuid);
      if (!s) continue;
      const attempts = (this.retry.get(uuid)?.attempts ?? 0) + 1;
      const delay = Math.min(300_000, 5000 * 2 ** (attempts - 1));
      this.retry.set(uuid, { attempts, until: now + delay, message, fingerprint: fingerprint(s) });
    }
    for (const uuid of this.retry.keys()) if (!failed.has(uuid)) this.retry.delete(uuid);
    return result;
  }

  private async protocols(): Promise<Map<string, ProtocolInfo>> {
    try {
      return new Map((await this.deps.bird.protocols()).map((p) => [p.name, p]));
    } catch (err) {
      this.deps.log.warn({ err: (err as Error).message }, 'cannot read BIRD protocols');
      return new Map();
    }
  }

  /** The status the controller should show for a session, or undefined for "no report". */
  private async statusOf(
    s: AgentSession,
    failed: Map<string, string>,
    protocols: Map<string, ProtocolInfo>,
    birdFailed: boolean,
    links: Map<string, WgInterfaceState>,
  ): Promise<SessionStatusCode | undefined> {
    if (s.status === SessionStatus.QUEUED_FOR_DELETE) {
      // Torn down when neither link nor file remains and BIRD accepted the config without it (a removed
      // protocol may still be listed, down, while BIRD flushes its routes).
      const proto = protocols.get(sessionProtocolName(s.listenPort));
      const file = await readTextIfExists(join(this.deps.config.routing.peerConfDir, peerFileName(s)));
      const gone = !links.has(s.interface) && file === undefined && (!proto || proto.state !== 'up');
      return gone && !birdFailed ? SessionStatus.DISABLED : undefined;
    }
    if (!wantsUp(s)) return undefined;
    if (failed.has(s.uuid)) {
      this.upSince.delete(s.uuid);
      return s.status === SessionStatus.ACTIVE || s.status === SessionStatus.ERROR
        ? SessionStatus.ERROR
        : SessionStatus.SETUP_FAILED;
    }
    const proto = protocols.get(sessionProtocolName(s.listenPort));
    if (!proto) return undefined; // BIRD unreadable or not configured yet: no verdict this pass
    const since = this.upSince.get(s.uuid) ?? Date.now();
    this.upSince.set(s.uuid, since);
    if (s.status === SessionStatus.QUEUED_FOR_SETUP || s.status === SessionStatus.SETUP_FAILED) {
      return SessionStatus.ACTIVE;
    }
    const established = proto.bgpState === 'Established';
    if (established) return SessionStatus.ACTIVE;
    const handshakeAge = handshakeAgeSeconds(links.get(s.interface));
    const grace = this.deps.errorGraceMs ?? 300_000;
    const stale = this.deps.handshakeStaleSeconds ?? HANDSHAKE_STALE_S;
    if (Date.now() - since > grace && handshakeAge > stale) return SessionStatus.ERROR;
    return s.status === SessionStatus.ERROR ? SessionStatus.ERROR : SessionStatus.ACTIVE;
  }
}

function handshakeAgeSeconds(link: WgInterfaceState | undefined): number {
  const hs = link?.wg?.peers[0]?.latestHandshake ?? 0;
  return hs === 0 ? Number.POSITIVE_INFINITY : Date.now() / 1000 - hs;
}

/** What a retry depends on: a change of the session (modify, restart) retries at once. */
function fingerprint(s: AgentSession): string {
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

/** The latency the file on disk was rendered with, so a restarted agent renders the same bytes. */
function latencyFromFile(text: string | undefined): number | null {
  const m = text ? /import where \w+\((\d), /.exec(text) : null;
  if (!m) return null;
  const tier = Number(m[1]);
  // latencyCommunity maps an RTT back to the tier: the upper bound of each tier renders the same.
  const bounds = [2.7, 7.3, 20, 55, 148, 403, 1097, 2981];
  return tier >= 1 && tier <= 8 ? (bounds[tier - 1] ?? null) : null;
}
